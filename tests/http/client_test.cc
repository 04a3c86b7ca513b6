// The HTTP client against a real local server: limits, keep-alive reuse, timeouts, and the
// asynchronous client.
#include <gtest/gtest.h>

#include <future>

#include "http/client.h"
#include "http/server.h"

namespace agentpay {
namespace {

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = HttpServer::Start("127.0.0.1", 0, ServerLimits{}, [](const HttpRequest& request) {
      HttpResponse response;
      if (request.Path() == "/big") response.body = std::string(64 * 1024, 'x');
      if (request.Path() == "/hang") response.disposition = Disposition::kHang;
      if (request.Path() == "/drop") response.disposition = Disposition::kDropConnection;
      if (request.Path() == "/echo") response.body = request.body;
      return response;
    });
    ASSERT_TRUE(server.ok());
    server_ = std::move(*server);
    endpoint_ = *ParseHttpUrl("http://127.0.0.1:" + std::to_string(server_->port()));
  }

  ClientResponse Get(const std::string& path, ClientOptions options = {}) {
    ClientRequest request;
    request.target = path;
    return SendHttp(endpoint_, request, options);
  }

  std::unique_ptr<HttpServer> server_;
  Endpoint endpoint_;
};

// Beast 1.74 skips body_limit when the header and body arrive in one read; the client must not.
TEST_F(ClientTest, ResponseOverTheLimitIsRefused) {
  ClientOptions options;
  options.max_response_bytes = 1024;
  ClientResponse response = Get("/big", options);
  EXPECT_EQ(response.error, ClientError::kTooLarge) << response.detail;
  EXPECT_TRUE(response.body.empty());
  EXPECT_EQ(Get("/big").body.size(), 64u * 1024u);
}

TEST_F(ClientTest, TimeoutAndDroppedConnectionAreTold) {
  ClientOptions options;
  options.timeout_ms = 200;
  EXPECT_EQ(Get("/hang", options).error, ClientError::kTimeout);
  EXPECT_EQ(Get("/drop").error, ClientError::kClosed);
  // The client recovers: the next exchange opens a fresh connection.
  EXPECT_EQ(Get("/").status, 200);
}

TEST_F(ClientTest, AsyncClientCompletesOnItsOwnThread) {
  AsyncHttpClient client;
  std::promise<ClientResponse> answer;
  ClientRequest request;
  request.method = "POST";
  request.target = "/echo";
  request.body = "hello";
  client.Send(endpoint_, request, ClientOptions{},
              [&answer](ClientResponse response) { answer.set_value(std::move(response)); });
  ClientResponse response = answer.get_future().get();
  EXPECT_EQ(response.error, ClientError::kNone);
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "hello");
}

TEST_F(ClientTest, ConnectionRefusedMeansNeverSent) {
  server_->Stop();
  EXPECT_EQ(Get("/").error, ClientError::kConnect);
}

}  // namespace
}  // namespace agentpay
