// TLS for the HTTP client and listener: whom the client believes (TlsTrust) and what a listener
// presents (TlsIdentity, reloadable). OpenSSL through Boost.Asio, seen only by tls.cc, client.cc
// and server.cc (http/tls_context.h). There is no way to turn certificate verification off.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "core/result.h"

namespace agentpay {

// The certificate authorities an HTTPS client trusts: the system's store (/etc/ssl/certs), always,
// plus the PEM certificates of a private CA file. Clients offer TLS 1.2 or later, send the host
// name (SNI) and check that the certificate names the host they asked for.
class TlsTrust {
 public:
  struct Impl;
  // The system store, plus the certificates in ca_file when it is not empty. Errors
  // (invalid_config) name the file and what is wrong with it.
  static Result<std::shared_ptr<const TlsTrust>> Load(const std::string& ca_file);
  // The system store alone, built once per process.
  static std::shared_ptr<const TlsTrust> System();

  explicit TlsTrust(std::unique_ptr<Impl> impl);
  ~TlsTrust();
  Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// A listener's certificate chain and private key (PEM files), read again by Reload: connections
// accepted after a reload present the new certificate, those already open keep theirs.
class TlsIdentity {
 public:
  struct Impl;
  static Result<std::shared_ptr<TlsIdentity>> Load(const std::string& cert_file,
                                                   const std::string& key_file);
  // Reads the files again. On any error the identity in use stays and the error is returned.
  Status Reload();
  // The context new connections use (internal: http/tls_context.h knows Impl).
  std::shared_ptr<Impl> Current() const;

  TlsIdentity(std::string cert_file, std::string key_file, std::shared_ptr<Impl> current);
  ~TlsIdentity();

 private:
  const std::string cert_file_, key_file_;
  mutable std::mutex mutex_;
  std::shared_ptr<Impl> current_;
};

}  // namespace agentpay
