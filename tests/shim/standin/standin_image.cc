// TEST DOUBLE: reads kernels out of nvcc's cubins (ELF), fatbins (ELF entries inside,
// uncompressed: build with --no-compress) and PTX text: names, and for ELF images the
// parameter layout the driver launches with (.nv.info.<kernel>: EIATTR_KPARAM_INFO,
// EIATTR_CBANK_PARAM_SIZE), so that launches are checked as the driver checks them.
#include <elf.h>

#include <algorithm>
#include <cstring>

#include "standin.h"

namespace gandiva::standin {
namespace {

constexpr uint32_t kFatbinMagic = 0xBA55ED50;
constexpr uint32_t kFatbinWrapperMagic = 0x466243b1;

// .nv.info attributes (records: u8 format, u8 attribute, then a u16 value, or for
// EIFMT_SVAL a u16 size and that many bytes).
constexpr uint8_t kEifmtSval = 4;
constexpr uint8_t kEiattrKparamInfo = 0x17;
constexpr uint8_t kEiattrCbankParamSize = 0x19;

// Fills the parameter layout of `k` from its .nv.info.<name> section.
void ParseNvInfo(const unsigned char* p, size_t n, KernelInfo* k) {
  std::vector<KernelParam> params;
  int param_bytes = -1;
  for (size_t at = 0; at + 4 <= n;) {
    const uint8_t format = p[at], attr = p[at + 1];
    uint16_t value;
    std::memcpy(&value, p + at + 2, 2);
    const size_t next = at + 4 + (format == kEifmtSval ? value : 0);
    if (next > n) break;
    if (format == kEifmtSval && attr == kEiattrKparamInfo && value >= 12) {
      // u32 index, u16 ordinal, u16 offset, u32 flags (size in bits 18..31).
      uint16_t ordinal, offset;
      uint32_t flags;
      std::memcpy(&ordinal, p + at + 8, 2);
      std::memcpy(&offset, p + at + 10, 2);
      std::memcpy(&flags, p + at + 12, 4);
      if (params.size() <= ordinal) params.resize(ordinal + 1);
      params[ordinal] = {offset, static_cast<uint16_t>(flags >> 18)};
    } else if (format != kEifmtSval && attr == kEiattrCbankParamSize) {
      param_bytes = value;
    }
    at = next;
  }
  k->params = params;
  k->param_bytes = param_bytes >= 0 ? param_bytes : 0;
  for (const KernelParam& q : params)
    k->param_bytes = std::max<int>(k->param_bytes, q.offset + q.size);
  k->params_known = true;
}

bool ElfKernels(const unsigned char* p, size_t limit, std::vector<KernelInfo>* kernels) {
  if (limit < sizeof(Elf64_Ehdr) || std::memcmp(p, ELFMAG, SELFMAG) != 0 ||
      p[EI_CLASS] != ELFCLASS64)
    return false;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(p);
  if (eh->e_shoff == 0 || eh->e_shoff + uint64_t{eh->e_shnum} * sizeof(Elf64_Shdr) > limit)
    return false;
  const auto* sh = reinterpret_cast<const Elf64_Shdr*>(p + eh->e_shoff);
  const size_t first = kernels->size();
  bool any = false;
  for (int i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
    const auto* syms = reinterpret_cast<const Elf64_Sym*>(p + sh[i].sh_offset);
    const char* strtab = reinterpret_cast<const char*>(p + sh[sh[i].sh_link].sh_offset);
    for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); ++k) {
      if (ELF64_ST_TYPE(syms[k].st_info) != STT_FUNC || syms[k].st_shndx == SHN_UNDEF) continue;
      KernelInfo info;
      info.name = strtab + syms[k].st_name;
      kernels->push_back(info);
      any = true;
    }
  }
  // Parameter layouts: section ".nv.info.<kernel>".
  if (eh->e_shstrndx == SHN_UNDEF || eh->e_shstrndx >= eh->e_shnum) return any;
  const char* names = reinterpret_cast<const char*>(p + sh[eh->e_shstrndx].sh_offset);
  for (int i = 0; i < eh->e_shnum; ++i) {
    const char* section = names + sh[i].sh_name;
    if (std::strncmp(section, ".nv.info.", 9) != 0) continue;
    if (sh[i].sh_offset + sh[i].sh_size > limit) continue;
    for (size_t k = first; k < kernels->size(); ++k)
      if ((*kernels)[k].name == section + 9)
        ParseNvInfo(p + sh[i].sh_offset, sh[i].sh_size, &(*kernels)[k]);
  }
  return any;
}

bool PtxKernels(const char* text, std::vector<KernelInfo>* kernels) {
  bool any = false;
  for (const char* p = std::strstr(text, ".entry "); p; p = std::strstr(p + 7, ".entry ")) {
    const char* b = p + 7;
    const char* e = b;
    while (*e && *e != '(' && *e != ' ' && *e != '\n') ++e;
    KernelInfo info;  // PTX: parameters not read (params_known stays false)
    info.name.assign(b, e);
    kernels->push_back(info);
    any = true;
  }
  return any;
}

}  // namespace

bool KernelsInImage(const void* image, std::vector<KernelInfo>* kernels) {
  if (!image) return false;
  const auto* p = static_cast<const unsigned char*>(image);
  uint32_t magic;
  std::memcpy(&magic, p, 4);
  if (magic == kFatbinWrapperMagic) {  // cudart's wrapper: {magic, version, data, ...}
    const void* data;
    std::memcpy(&data, p + 8, sizeof(data));
    return KernelsInImage(data, kernels);
  }
  if (magic == kFatbinMagic) {
    uint64_t size;
    uint16_t header;
    std::memcpy(&header, p + 6, 2);
    std::memcpy(&size, p + 8, 8);
    bool any = false;
    const size_t total = header + size;
    for (size_t off = header; off + 4 <= total; ++off)
      if (std::memcmp(p + off, ELFMAG, SELFMAG) == 0)
        any |= ElfKernels(p + off, total - off, kernels);
    return any;
  }
  if (std::memcmp(p, ELFMAG, SELFMAG) == 0) return ElfKernels(p, SIZE_MAX / 2, kernels);
  return PtxKernels(reinterpret_cast<const char*>(p), kernels);
}

}  // namespace gandiva::standin
