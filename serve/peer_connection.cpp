#include "serve/peer_connection.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace qforge::serve {
namespace {

// "127.0.0.1", 8080 of an IPv4 or IPv6 socket address.
bool same_end(const sockaddr_storage& address, const std::string& host, int port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(address);
    inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
    return ntohs(a.sin_port) == port && host == text;
  }
  if (address.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(address);
    inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
    return ntohs(a.sin6_port) == port && host == text;
  }
  return false;
}

}  // namespace

PeerConnection::PeerConnection(const std::string& local_addr, int local_port,
                               const std::string& remote_addr, int remote_port) {
  if (local_port < 0 || remote_port < 0) return;
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return;
  while (const dirent* entry = readdir(fds)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(fds)) continue;
    sockaddr_storage local{}, remote{};
    socklen_t local_size = sizeof local, remote_size = sizeof remote;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &local_size) != 0 ||
        getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&remote), &remote_size) != 0)
      continue;
    if (same_end(local, local_addr, local_port) && same_end(remote, remote_addr, remote_port)) {
      fd_ = static_cast<int>(fd);
      break;
    }
  }
  closedir(fds);
}

bool PeerConnection::closed() const {
  if (fd_ < 0) return false;
  char byte = 0;
  const ssize_t got = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (got == 0) return true;  // orderly close
  if (got > 0) return false;  // the client sent more (a pipelined request): still there
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;  // reset
}

}  // namespace qforge::serve
