// HTTPS end to end on loopback: the client against the listener, with certificates made at run
// time by tests/tls/make-test-ca.sh (the openssl command line). What must hold: only a certificate
// that chains to a trusted CA and names the host is accepted, a failure names the host and the
// reason and sends nothing, keep-alive and resumed sessions spare handshakes, and a reload serves
// the new certificate to new connections without dropping open ones.
#include "http/tls.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "http/client.h"
#include "http/server.h"

namespace agentpay {
namespace {

ServerHooks TlsHooks(std::shared_ptr<const TlsIdentity> identity) {
  ServerHooks hooks;
  hooks.tls = std::move(identity);
  return hooks;
}

namespace fs = std::filesystem;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() /
                        ("agentpay-tls-test-" + std::to_string(::getpid())));
    const std::string command =
        "bash '" AGENTPAY_SOURCE_DIR "/tests/tls/make-test-ca.sh' '" + dir_->string() + "'";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string File(const std::string& name) { return (*dir_ / name).string(); }

  // Serves HTTPS with NAME.pem / NAME.key (copied, so that a test may overwrite them).
  void Serve(const std::string& name) {
    fs::copy_file(File(name + ".pem"), File("served.pem"), fs::copy_options::overwrite_existing);
    fs::copy_file(File(name + ".key"), File("served.key"), fs::copy_options::overwrite_existing);
    auto identity = TlsIdentity::Load(File("served.pem"), File("served.key"));
    ASSERT_TRUE(identity.ok()) << identity.status().message();
    identity_ = *identity;
    auto server = HttpServer::StartAsync(
        "127.0.0.1", 0, ServerLimits{},
        [this](std::shared_ptr<const HttpRequest> request, Respond respond) {
          ++handled_;
          HttpResponse response;
          response.body = "paid content for " + request->target;
          respond(std::move(response));
        },
        TlsHooks(identity_));
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(*server);
  }

  std::shared_ptr<const TlsTrust> Trust(const std::string& ca) {
    auto trust = TlsTrust::Load(ca.empty() ? "" : File(ca + ".pem"));
    EXPECT_TRUE(trust.ok()) << trust.status().message();
    return trust.ok() ? *trust : nullptr;
  }

  ClientResponse Get(const std::string& host, std::shared_ptr<const TlsTrust> trust,
                     bool keep_alive = true) {
    Endpoint endpoint = *ParseHttpUrl("https://" + host + ":" + std::to_string(server_->port()));
    ClientRequest request;
    request.target = "/report";
    ClientOptions options;
    options.trust = std::move(trust);
    options.keep_alive = keep_alive;
    options.timeout_ms = 5000;
    return SendHttp(endpoint, request, options);
  }

  static fs::path* dir_;
  std::shared_ptr<TlsIdentity> identity_;
  std::unique_ptr<HttpServer> server_;
  std::atomic<int> handled_{0};
};
fs::path* TlsTest::dir_ = nullptr;

TEST_F(TlsTest, ATrustedCertificateAnswersAndKeepAliveSparesHandshakes) {
  Serve("localhost");
  auto trust = Trust("ca");
  // Each thread has its own pool: a fresh thread starts with no connection to this server.
  std::thread([&] {
    for (int i = 0; i < 20; ++i) {
      ClientResponse response = Get("localhost", trust);
      ASSERT_EQ(response.error, ClientError::kNone) << response.detail;
      EXPECT_EQ(response.status, 200);
      EXPECT_EQ(response.body, "paid content for /report");
    }
    // The address works too: the certificate names 127.0.0.1 as well.
    EXPECT_EQ(Get("127.0.0.1", trust).status, 200);
  }).join();
  EXPECT_EQ(handled_.load(), 21);
  EXPECT_EQ(server_->Stats().accepted_connections, 2u);  // one per origin
  EXPECT_EQ(server_->Stats().tls_handshakes, 2u);
}

TEST_F(TlsTest, ANewConnectionResumesTheLastSession) {
  Serve("localhost");
  auto trust = Trust("ca");
  std::thread([&] {
    for (int i = 0; i < 5; ++i) {
      ClientResponse response = Get("localhost", trust, /*keep_alive=*/false);
      ASSERT_EQ(response.error, ClientError::kNone) << response.detail;
    }
  }).join();
  EXPECT_EQ(server_->Stats().tls_handshakes, 5u);
  EXPECT_EQ(server_->Stats().tls_resumed, 4u);
}

struct Refusal {
  const char* served;  // the certificate the server presents
  const char* host;    // the host the client asks for
  const char* trust;   // the CA file the client adds ("" for the system store alone)
  const char* reason;  // what the error must say
};

TEST_F(TlsTest, CertificatesThatDoNotVerifyAreRefusedBeforeAnythingIsSent) {
  const Refusal refusals[] = {
      {"localhost", "localhost", "", "unable to get local issuer certificate"},
      {"other", "localhost", "ca", "unable to get local issuer certificate"},
      {"wrong-host", "localhost", "ca", "hostname mismatch"},
      {"wrong-host", "127.0.0.1", "ca", "IP address mismatch"},
      {"expired", "localhost", "ca", "certificate has expired"},
  };
  for (const Refusal& refusal : refusals) {
    SCOPED_TRACE(std::string(refusal.served) + " for " + refusal.host);
    Serve(refusal.served);
    ClientResponse response;
    std::thread([&] { response = Get(refusal.host, Trust(refusal.trust)); }).join();
    EXPECT_EQ(response.error, ClientError::kTls);
    const std::string origin =
        std::string("https://") + refusal.host + ":" + std::to_string(server_->port());
    EXPECT_NE(response.detail.find("TLS handshake with " + origin + " failed"), std::string::npos)
        << response.detail;
    EXPECT_NE(response.detail.find(refusal.reason), std::string::npos) << response.detail;
    EXPECT_EQ(handled_.load(), 0) << "a request reached the server";
    server_->Stop();
  }
}

TEST_F(TlsTest, AReloadServesNewConnectionsAndKeepsOpenOnes) {
  Serve("localhost");
  auto ca = Trust("ca");
  auto other_ca = Trust("other-ca");
  std::thread([&] {
    ASSERT_EQ(Get("localhost", ca).status, 200);  // leaves a pooled connection
    fs::copy_file(File("other.pem"), File("served.pem"), fs::copy_options::overwrite_existing);
    fs::copy_file(File("other.key"), File("served.key"), fs::copy_options::overwrite_existing);
    ASSERT_TRUE(identity_->Reload().ok());
    // The open connection carries on with the certificate it began with.
    ClientResponse kept = Get("localhost", ca);
    EXPECT_EQ(kept.error, ClientError::kNone) << kept.detail;
    EXPECT_EQ(server_->Stats().accepted_connections, 1u);
  }).join();
  std::thread([&] {
    // A new connection gets the new certificate: the old CA no longer verifies it, the new one
    // does.
    ClientResponse old_ca = Get("localhost", ca);
    EXPECT_EQ(old_ca.error, ClientError::kTls);
    EXPECT_NE(old_ca.detail.find("unable to get local issuer certificate"), std::string::npos)
        << old_ca.detail;
    EXPECT_EQ(Get("localhost", other_ca).status, 200);
  }).join();
}

TEST_F(TlsTest, AFailedReloadKeepsTheCertificateInUse) {
  Serve("localhost");
  std::ofstream(File("served.pem"), std::ios::trunc) << "not a certificate\n";
  Status reload = identity_->Reload();
  ASSERT_FALSE(reload.ok());
  EXPECT_NE(reload.message().find(File("served.pem")), std::string::npos) << reload.message();
  fs::copy_file(File("other.key"), File("served.key"), fs::copy_options::overwrite_existing);
  fs::copy_file(File("localhost.pem"), File("served.pem"), fs::copy_options::overwrite_existing);
  reload = identity_->Reload();
  ASSERT_FALSE(reload.ok());
  EXPECT_NE(reload.message().find("is not the key of the certificate"), std::string::npos)
      << reload.message();
  std::thread([&] { EXPECT_EQ(Get("localhost", Trust("ca")).status, 200); }).join();
}

TEST_F(TlsTest, BadTrustAndIdentityFilesAreClearErrors) {
  auto missing = TlsTrust::Load(File("nowhere.pem"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--ca-file"), std::string::npos);
  EXPECT_NE(missing.status().message().find("cannot read it"), std::string::npos);
  std::ofstream(File("garbage.pem")) << "garbage\n";
  auto garbage = TlsTrust::Load(File("garbage.pem"));
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("no PEM certificate"), std::string::npos)
      << garbage.status().message();
  auto swapped = TlsIdentity::Load(File("localhost.key"), File("localhost.pem"));
  ASSERT_FALSE(swapped.ok());
  EXPECT_NE(swapped.status().message().find("--tls-cert"), std::string::npos)
      << swapped.status().message();
}

TEST_F(TlsTest, PlainHttpAndTlsDoNotMix) {
  Serve("localhost");
  std::thread([&] {
    // Plain HTTP to the TLS listener: no answer, the server stays up.
    Endpoint plain = *ParseHttpUrl("http://127.0.0.1:" + std::to_string(server_->port()));
    ClientRequest request;
    ClientOptions options;
    options.timeout_ms = 3000;
    ClientResponse response = SendHttp(plain, request, options);
    EXPECT_NE(response.error, ClientError::kNone);
    EXPECT_EQ(Get("localhost", Trust("ca")).status, 200);
  }).join();
  // TLS to a plain listener: refused before anything is sent.
  auto plain_server = HttpServer::StartAsync(
      "127.0.0.1", 0, ServerLimits{},
      [](std::shared_ptr<const HttpRequest>, Respond respond) { respond(HttpResponse{}); });
  ASSERT_TRUE(plain_server.ok());
  Endpoint endpoint = *ParseHttpUrl("https://127.0.0.1:" + std::to_string((*plain_server)->port()));
  ClientResponse response = SendHttp(endpoint, ClientRequest{}, ClientOptions{});
  EXPECT_EQ(response.error, ClientError::kTls);
  EXPECT_NE(response.detail.find("TLS handshake with https://127.0.0.1:"), std::string::npos)
      << response.detail;
  EXPECT_EQ((*plain_server)->Stats().requests, 0u);
}

TEST(HttpUrl, HttpsDefaultsToPort443AndKeepsTheHostName) {
  auto secure = ParseHttpUrl("https://sepolia.base.org");
  ASSERT_TRUE(secure.ok());
  EXPECT_TRUE(secure->tls);
  EXPECT_EQ(secure->host, "sepolia.base.org");
  EXPECT_EQ(secure->port, 443);
  EXPECT_EQ(secure->Origin(), "https://sepolia.base.org:443");
  auto plain = ParseHttpUrl("http://localhost/base/");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->tls);
  EXPECT_EQ(plain->host, "localhost");
  EXPECT_EQ(plain->port, 80);
  EXPECT_EQ(plain->base_path, "/base");
  auto other = ParseHttpUrl("ftp://example.com");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("http:// or https://"), std::string::npos);
}

}  // namespace
}  // namespace agentpay
