#include "model/format/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <utility>

#include "jit/base/error.h"

namespace qforge {

namespace {

// ---- the guard against a file that shrinks while it is mapped ----
//
// Reading a mapped page past the file's current end raises SIGBUS. Each live mapping is a
// slot here; the handler, if the faulting address lies in one, says which file changed
// and exits with status 1, and otherwise hands the signal to the disposition it replaced.
// Slots are claimed and released outside the handler; `begin` is published last and
// cleared first, so the handler sees whole slots only.
struct GuardSlot {
  std::atomic<bool> claimed{false};
  std::atomic<const std::byte*> begin{nullptr};
  std::size_t size = 0;
  char path[240] = {};
};
constexpr int kGuardSlots = 64;  // more live mappings than this go unguarded
GuardSlot g_slots[kGuardSlots];
struct sigaction g_previous_sigbus {};
std::once_flag g_guard_installed;

// Async-signal-safe output: a string, then an unsigned number.
void put(const char* text) {
  std::size_t length = 0;
  while (text[length] != '\0') ++length;
  while (length > 0) {
    const ssize_t written = ::write(STDERR_FILENO, text, length);
    if (written <= 0) return;
    text += written;
    length -= static_cast<std::size_t>(written);
  }
}
void put(std::size_t value) {
  char digits[24];
  int i = sizeof digits - 1;
  digits[i] = '\0';
  do {
    digits[--i] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0 && i > 0);
  put(digits + i);
}

void on_sigbus(int signal, siginfo_t* info, void* context) {
  const auto* at = static_cast<const std::byte*>(info->si_addr);
  for (const GuardSlot& slot : g_slots) {
    const std::byte* begin = slot.begin.load(std::memory_order_acquire);
    if (begin == nullptr || at < begin || at >= begin + slot.size) continue;
    put("qforge: error: ");
    put(slot.path);
    put(": the file shrank while it was mapped (it had ");
    put(slot.size);
    put(" bytes when opened; byte ");
    put(static_cast<std::size_t>(at - begin));
    put(" is gone): a model file must not change while qforge reads it\n");
    ::_exit(1);
  }
  // Not a mapped file's page: whatever handled SIGBUS before.
  if ((g_previous_sigbus.sa_flags & SA_SIGINFO) != 0 && g_previous_sigbus.sa_sigaction != nullptr) {
    g_previous_sigbus.sa_sigaction(signal, info, context);
  } else if (g_previous_sigbus.sa_handler != SIG_DFL && g_previous_sigbus.sa_handler != SIG_IGN) {
    g_previous_sigbus.sa_handler(signal);
  } else {
    ::signal(SIGBUS, SIG_DFL);                // a faulting access runs again and ends the process;
    if (info->si_code <= 0) ::raise(signal);  // a signal sent by a process is sent again
  }
}

void install_guard() {
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGBUS, &action, &g_previous_sigbus);
}

void guard(const std::byte* begin, std::size_t size, const std::string& path) {
  std::call_once(g_guard_installed, install_guard);
  for (GuardSlot& slot : g_slots) {
    bool expected = false;
    if (!slot.claimed.compare_exchange_strong(expected, true)) continue;
    slot.size = size;
    const std::size_t length = std::min(path.size(), sizeof slot.path - 1);
    std::memcpy(slot.path, path.data(), length);
    slot.path[length] = '\0';
    slot.begin.store(begin, std::memory_order_release);
    return;
  }
}

void unguard(const std::byte* begin) {
  for (GuardSlot& slot : g_slots) {
    if (slot.begin.load(std::memory_order_acquire) != begin) continue;
    slot.begin.store(nullptr, std::memory_order_release);
    slot.claimed.store(false, std::memory_order_release);
    return;
  }
}

// Closes the descriptor on every path out of the constructor; the mapping does not need it.
struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MappedFile::MappedFile(std::string path) : path_(std::move(path)) {
  FileDescriptor file{::open(path_.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) fail(path_, ": cannot open: ", std::strerror(errno));

  struct stat info {};
  if (::fstat(file.fd, &info) != 0) fail(path_, ": cannot stat: ", std::strerror(errno));
  if (!S_ISREG(info.st_mode)) fail(path_, ": not a regular file");

  size_ = static_cast<std::size_t>(info.st_size);
  if (size_ == 0) return;

  void* mapping = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd, 0);
  if (mapping == MAP_FAILED) {
    size_ = 0;
    fail(path_, ": cannot map ", info.st_size, " bytes: ", std::strerror(errno));
  }
  data_ = static_cast<const std::byte*>(mapping);
  guard(data_, size_, path_);
  // A file that changed size between the first look and the mapping is refused now; one
  // that shrinks later is caught by the guard when a page past its end is read.
  struct stat after {};
  if (::fstat(file.fd, &after) != 0 || after.st_size != info.st_size) {
    const long long now = after.st_size;
    release();
    fail(path_, ": the file changed size while it was being opened (", info.st_size, " then ", now,
         " bytes): a model file must not change while qforge reads it");
  }
}

MappedFile::~MappedFile() {
  release();
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::release() noexcept {
  if (data_) {
    unguard(data_);
    ::munmap(const_cast<std::byte*>(data_), size_);
  }
  data_ = nullptr;
  size_ = 0;
}

}  // namespace qforge
