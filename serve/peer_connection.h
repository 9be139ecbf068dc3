// Notices a client that has gone while its non-streamed answer is being generated.
// cpp-httplib 0.11 hands a handler no socket, so the connection's socket is found among
// the process's descriptors by its two ends (local and remote address and port), which
// identify one TCP connection. It stays open while the handler runs (the server closes it
// after), so the descriptor cannot be reused in between.
//
//   closed(): recv(MSG_PEEK | MSG_DONTWAIT) == 0 (an orderly close) or a reset
#pragma once

#include <string>

namespace qforge::serve {

class PeerConnection {
 public:
  PeerConnection(const std::string& local_addr, int local_port, const std::string& remote_addr,
                 int remote_port);
  bool found() const { return fd_ >= 0; }
  // True once the client has closed or reset the connection; false while it is open or
  // when the socket was not found.
  bool closed() const;

 private:
  int fd_ = -1;
};

}  // namespace qforge::serve
