// TlsTrust and TlsIdentity; see tls.h.
#include "http/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "http/tls_context.h"

namespace agentpay {
namespace {

Status Invalid(std::string message) {
  return Status::Error(ErrorCode::kInvalidConfig, std::move(message));
}

// The last OpenSSL error queued by a failed call, as text ("" when none), and the queue emptied.
std::string TakeOpenSslError() {
  unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0) return "";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  const char* reason = ERR_reason_error_string(code);
  return reason ? reason : text;
}

// A clear error for a file we cannot open, before OpenSSL's less helpful one.
Status CheckReadable(const std::string& flag, const std::string& file) {
  std::ifstream in(file);
  if (!in) return Invalid(flag + " " + file + ": cannot read it: " + std::strerror(errno));
  return Status::Ok();
}

// What both sides share: TLS 1.2 at least, no renegotiation, no compression.
void Harden(SSL_CTX* ctx) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
}

Result<std::shared_ptr<TlsIdentity::Impl>> BuildIdentity(const std::string& cert_file,
                                                         const std::string& key_file) {
  if (Status s = CheckReadable("--tls-cert", cert_file); !s.ok()) return s;
  if (Status s = CheckReadable("--tls-key", key_file); !s.ok()) return s;
  auto impl = std::make_shared<TlsIdentity::Impl>();
  SSL_CTX* ctx = impl->context.native_handle();
  Harden(ctx);
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()) != 1) {
    return Invalid("--tls-cert " + cert_file + ": not a PEM certificate chain (" +
                   TakeOpenSslError() + ")");
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    const bool mismatch = ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
    const std::string reason = TakeOpenSslError();
    if (mismatch) {
      return Invalid("--tls-key " + key_file + " is not the key of the certificate in " +
                     cert_file);
    }
    return Invalid("--tls-key " + key_file + ": not a PEM private key (" + reason + ")");
  }
  return impl;
}

}  // namespace

TlsTrust::TlsTrust(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TlsTrust::~TlsTrust() = default;

Result<std::shared_ptr<const TlsTrust>> TlsTrust::Load(const std::string& ca_file) {
  auto impl = std::make_unique<Impl>();
  SSL_CTX* ctx = impl->context.native_handle();
  Harden(ctx);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  ERR_clear_error();
  // The system store is always used; a missing one only leaves fewer CAs trusted.
  if (SSL_CTX_set_default_verify_paths(ctx) != 1) ERR_clear_error();
  if (!ca_file.empty()) {
    if (Status s = CheckReadable("--ca-file", ca_file); !s.ok()) return s;
    if (SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr) != 1) {
      return Invalid("--ca-file " + ca_file + ": no PEM certificate in it (" + TakeOpenSslError() +
                     ")");
    }
  }
  return std::shared_ptr<const TlsTrust>(std::make_shared<TlsTrust>(std::move(impl)));
}

std::shared_ptr<const TlsTrust> TlsTrust::System() {
  static const std::shared_ptr<const TlsTrust> system = *Load("");
  return system;
}

TlsIdentity::TlsIdentity(std::string cert_file, std::string key_file, std::shared_ptr<Impl> current)
    : cert_file_(std::move(cert_file)),
      key_file_(std::move(key_file)),
      current_(std::move(current)) {}
TlsIdentity::~TlsIdentity() = default;

Result<std::shared_ptr<TlsIdentity>> TlsIdentity::Load(const std::string& cert_file,
                                                       const std::string& key_file) {
  auto impl = BuildIdentity(cert_file, key_file);
  if (!impl.ok()) return impl.status();
  return std::make_shared<TlsIdentity>(cert_file, key_file, std::move(*impl));
}

Status TlsIdentity::Reload() {
  auto impl = BuildIdentity(cert_file_, key_file_);
  if (!impl.ok()) return impl.status();
  std::lock_guard lock(mutex_);
  current_ = std::move(*impl);
  return Status::Ok();
}

std::shared_ptr<TlsIdentity::Impl> TlsIdentity::Current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

std::string TlsFailureReason(const SSL* ssl, const boost::system::error_code& ec) {
  if (ssl != nullptr) {
    const long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) return X509_verify_cert_error_string(verify);
  }
  return ec.message();
}

}  // namespace agentpay
