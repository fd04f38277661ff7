// IdSet: a set of small non-negative ids (machines, GPU groups) as a bitmap
// with a summary word per 64 words. Insert and erase are O(1) and allocate
// only when the set first grows to an id; iteration is in ascending id
// order, like std::set<int>'s, skipping empty words 64 at a time. The indexes
// that policies query at every event (free GPUs by machine, groups by size)
// keep their members here: at a million jobs, std::set's node allocations and
// cache misses were most of a replay's time.
#ifndef GANDIVA_SCHED_ID_SET_H_
#define GANDIVA_SCHED_ID_SET_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

namespace gandiva::sched {

class IdSet {
 public:
  // True if `id` (>= 0) was added / removed.
  bool insert(int id) {
    size_t w = static_cast<size_t>(id) >> 6;
    if (w >= bits_.size()) {
      bits_.resize(w + 1, 0);
      summary_.resize((bits_.size() + 63) >> 6, 0);
    }
    uint64_t bit = 1ULL << (id & 63);
    if (bits_[w] & bit) return false;
    bits_[w] |= bit;
    summary_[w >> 6] |= 1ULL << (w & 63);
    ++size_;
    return true;
  }
  bool erase(int id) {
    size_t w = static_cast<size_t>(id) >> 6;
    uint64_t bit = 1ULL << (id & 63);
    if (w >= bits_.size() || !(bits_[w] & bit)) return false;
    bits_[w] &= ~bit;
    if (!bits_[w]) summary_[w >> 6] &= ~(1ULL << (w & 63));
    --size_;
    return true;
  }
  bool contains(int id) const {
    size_t w = static_cast<size_t>(id) >> 6;
    return w < bits_.size() && ((bits_[w] >> (id & 63)) & 1);
  }
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  size_t count(int id) const { return contains(id) ? 1 : 0; }
  // The smallest member >= id, or -1.
  int next_from(int id) const {
    size_t w = static_cast<size_t>(id) >> 6;
    if (w >= bits_.size()) return -1;
    uint64_t m = bits_[w] & (~0ULL << (id & 63));
    if (m) return static_cast<int>(w * 64 + std::countr_zero(m));
    // The next non-empty word, from the summary.
    size_t from = w + 1;
    for (size_t s = from >> 6; s < summary_.size(); ++s) {
      uint64_t sm = summary_[s];
      if (s == (from >> 6)) sm &= (from & 63) ? ~0ULL << (from & 63) : ~0ULL;
      if (sm) {
        size_t word = s * 64 + std::countr_zero(sm);
        return static_cast<int>(word * 64 + std::countr_zero(bits_[word]));
      }
    }
    return -1;
  }

  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = int;
    using difference_type = std::ptrdiff_t;
    using pointer = const int*;
    using reference = int;
    iterator() = default;
    iterator(const IdSet* set, int id) : set_(set), id_(id) {}
    int operator*() const { return id_; }
    iterator& operator++() {
      id_ = set_->next_from(id_ + 1);
      return *this;
    }
    iterator operator++(int) {
      iterator old = *this;
      ++*this;
      return old;
    }
    bool operator==(const iterator& o) const { return id_ == o.id_; }
    bool operator!=(const iterator& o) const { return id_ != o.id_; }

   private:
    const IdSet* set_ = nullptr;
    int id_ = -1;
  };
  iterator begin() const { return {this, empty() ? -1 : next_from(0)}; }
  iterator end() const { return {this, -1}; }

 private:
  std::vector<uint64_t> bits_;     // bit i of word w: id w*64+i is a member
  std::vector<uint64_t> summary_;  // bit j of word s: bits_[s*64+j] != 0
  size_t size_ = 0;
};

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_ID_SET_H_
