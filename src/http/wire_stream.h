// A Beast SyncReadStream over bytes in memory, delivered in pieces of a chosen size: lets the
// parsing of server.cc and client.cc run on given bytes exactly as it runs on a socket (for tests
// and the fuzz targets in fuzz/). Included only by server.cc and client.cc, which know Beast.
#pragma once

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/system/system_error.hpp>
#include <string_view>

namespace agentpay {

class WireStream {
 public:
  // Each read_some returns at most chunk_bytes (0: everything left), then end of file.
  WireStream(std::string_view wire, size_t chunk_bytes)
      : rest_(wire), chunk_bytes_(chunk_bytes == 0 ? wire.size() + 1 : chunk_bytes) {}

  template <class MutableBufferSequence>
  size_t read_some(const MutableBufferSequence& buffers, boost::beast::error_code& ec) {
    if (rest_.empty()) {
      ec = boost::asio::error::eof;
      return 0;
    }
    ec = {};
    const size_t piece = std::min(rest_.size(), chunk_bytes_);
    const size_t copied =
        boost::asio::buffer_copy(buffers, boost::asio::buffer(rest_.data(), piece));
    rest_.remove_prefix(copied);
    return copied;
  }

  template <class MutableBufferSequence>
  size_t read_some(const MutableBufferSequence& buffers) {
    boost::beast::error_code ec;
    const size_t copied = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return copied;
  }

 private:
  std::string_view rest_;
  size_t chunk_bytes_;
};

}  // namespace agentpay
