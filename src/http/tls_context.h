// The OpenSSL contexts behind TlsTrust and TlsIdentity, for client.cc and server.cc only (they
// include Boost.Asio's SSL headers, which nothing else needs).
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <string>

#include "http/tls.h"

namespace agentpay {

struct TlsTrust::Impl {
  boost::asio::ssl::context context{boost::asio::ssl::context::tls_client};
};

struct TlsIdentity::Impl {
  boost::asio::ssl::context context{boost::asio::ssl::context::tls_server};
};

// Why a handshake failed, for an error that names the host: the certificate's verification result
// when there is one ("certificate has expired", "hostname mismatch", "unable to get local issuer
// certificate"), else the TLS error itself.
std::string TlsFailureReason(const SSL* ssl, const boost::system::error_code& ec);

}  // namespace agentpay
