// TEST DOUBLE: reads kernel names out of nvcc's cubins (ELF), fatbins (ELF entries
// inside, uncompressed: build with --no-compress) and PTX text.
#include <elf.h>

#include <cstring>

#include "standin.h"

namespace gandiva::standin {
namespace {

constexpr uint32_t kFatbinMagic = 0xBA55ED50;
constexpr uint32_t kFatbinWrapperMagic = 0x466243b1;

bool ElfKernels(const unsigned char* p, size_t limit, std::vector<std::string>* names) {
  if (limit < sizeof(Elf64_Ehdr) || std::memcmp(p, ELFMAG, SELFMAG) != 0 ||
      p[EI_CLASS] != ELFCLASS64)
    return false;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(p);
  if (eh->e_shoff == 0 || eh->e_shoff + uint64_t{eh->e_shnum} * sizeof(Elf64_Shdr) > limit)
    return false;
  const auto* sh = reinterpret_cast<const Elf64_Shdr*>(p + eh->e_shoff);
  bool any = false;
  for (int i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
    const auto* syms = reinterpret_cast<const Elf64_Sym*>(p + sh[i].sh_offset);
    const char* strtab = reinterpret_cast<const char*>(p + sh[sh[i].sh_link].sh_offset);
    for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); ++k) {
      if (ELF64_ST_TYPE(syms[k].st_info) != STT_FUNC || syms[k].st_shndx == SHN_UNDEF) continue;
      names->push_back(strtab + syms[k].st_name);
      any = true;
    }
  }
  return any;
}

bool PtxKernels(const char* text, std::vector<std::string>* names) {
  bool any = false;
  for (const char* p = std::strstr(text, ".entry "); p; p = std::strstr(p + 7, ".entry ")) {
    const char* b = p + 7;
    const char* e = b;
    while (*e && *e != '(' && *e != ' ' && *e != '\n') ++e;
    names->emplace_back(b, e);
    any = true;
  }
  return any;
}

}  // namespace

bool KernelNamesInImage(const void* image, std::vector<std::string>* names) {
  if (!image) return false;
  const auto* p = static_cast<const unsigned char*>(image);
  uint32_t magic;
  std::memcpy(&magic, p, 4);
  if (magic == kFatbinWrapperMagic) {  // cudart's wrapper: {magic, version, data, ...}
    const void* data;
    std::memcpy(&data, p + 8, sizeof(data));
    return KernelNamesInImage(data, names);
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
        any |= ElfKernels(p + off, total - off, names);
    return any;
  }
  if (std::memcmp(p, ELFMAG, SELFMAG) == 0) return ElfKernels(p, SIZE_MAX / 2, names);
  return PtxKernels(reinterpret_cast<const char*>(p), names);
}

}  // namespace gandiva::standin
