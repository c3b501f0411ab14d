#include "engine/formats/mapped_tensor.h"

#include <ATen/ATen.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>

#include "engine/formats/format_error.h"
#include "engine/formats/file_io.h"

namespace accel::formats {

namespace {

// The live mappings, read by the SIGBUS handler (Note [weights lost under a
// mapping]): fixed slots of atomics, since a signal handler may neither lock
// nor allocate. A mapping that finds no free slot still works; a SIGBUS in it
// just goes unnamed.
struct Slot {
  std::atomic<bool> taken{false};
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<const char*> path{nullptr};
};
constexpr size_t kSlots = 4096;
Slot g_slots[kSlots];
struct sigaction g_previous {};

void write_text(const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

void on_sigbus(int signal, siginfo_t* info, void*) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& slot : g_slots) {
    const uintptr_t begin = slot.begin.load(std::memory_order_acquire);
    if (begin != 0 && address >= begin && address < slot.end.load(std::memory_order_acquire)) {
      write_text("accel: the weights file '");
      write_text(slot.path.load(std::memory_order_acquire));
      write_text("' lost bytes while this process used them from a mapping: another process truncated it or "
                 "rewrote it in place (write a new file and rename it over the old one instead)\n");
      break;
    }
  }
  // Back to the previous handling; returning re-runs the faulting read,
  // which now meets it (by default the process ends with SIGBUS). A SIGBUS
  // sent rather than faulted is raised again.
  ::sigaction(SIGBUS, &g_previous, nullptr);
  if (info->si_code <= 0) ::raise(signal);
}

void install_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &g_previous);
  });
}

Slot* take_slot(uintptr_t begin, uintptr_t end, const char* path) {
  for (Slot& slot : g_slots) {
    bool free = false;
    if (slot.taken.compare_exchange_strong(free, true)) {
      slot.path.store(path, std::memory_order_release);
      slot.end.store(end, std::memory_order_release);
      slot.begin.store(begin, std::memory_order_release);
      return &slot;
    }
  }
  return nullptr;
}

void give_back(Slot* slot) {
  if (!slot) return;
  slot->begin.store(0, std::memory_order_release);
  slot->taken.store(false, std::memory_order_release);
}

}  // namespace

at::Tensor map_tensor(const FileReader& file, uint64_t offset, at::IntArrayRef shape, at::ScalarType dtype,
                      const std::string& what) {
  const auto element = static_cast<uint64_t>(at::elementSize(dtype));
  uint64_t bytes = element;
  for (int64_t d : shape) bytes *= static_cast<uint64_t>(d);
  TORCH_CHECK(offset % element == 0, "map_tensor: ", what, " at byte ", offset, " of '", file.path(),
              "' is not aligned to its elements");
  // The size now, not at opening: bytes mapped past the end would raise
  // SIGBUS on their first read rather than an error here.
  struct stat st {};
  if (::fstat(file.fd(), &st) != 0) {
    throw FormatError("'" + file.path() + "': cannot read its size: " + std::strerror(errno));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (offset > size || bytes > size - offset) {
    throw FormatError("'" + file.path() + "' is truncated: " + what + " needs bytes " + std::to_string(offset) +
                          " to " + std::to_string(offset + bytes) + " but the file has " + std::to_string(size));
  }
  static const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t first = offset / page * page;
  const std::size_t length = static_cast<std::size_t>(offset + bytes - first);
  void* base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, file.fd(), static_cast<off_t>(first));
  if (base == MAP_FAILED) {
    throw FormatError("'" + file.path() + "': cannot map " + what + ": " + std::strerror(errno));
  }
  install_handler();
  auto path = std::make_shared<const std::string>(file.path());
  const auto begin = reinterpret_cast<uintptr_t>(base);
  Slot* slot = take_slot(begin, begin + length, path->c_str());
  auto release = [base, length, slot, path](void*) {
    give_back(slot);
    ::munmap(base, length);
  };
  return at::from_blob(static_cast<char*>(base) + (offset - first), shape, release,
                       at::TensorOptions().dtype(dtype));
}

}  // namespace accel::formats
