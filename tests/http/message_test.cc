// Plain HTTP values and address parsing.
#include "http/message.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "http/client.h"
#include "http/server.h"

namespace agentpay {
namespace {

TEST(HttpMessage, HeadersAreCaseInsensitive) {
  HttpRequest request;
  request.headers = {{"idempotency-key", "a"}, {"Idempotency-Key", "b"}};
  EXPECT_EQ(request.Header("IDEMPOTENCY-KEY"), "a");
  EXPECT_FALSE(request.Header("Authorization").has_value());
  HttpResponse response;
  response.SetHeader("X-A", "1");
  response.SetHeader("x-a", "2");
  ASSERT_EQ(response.headers.size(), 1u);
  EXPECT_EQ(response.Header("X-A"), "2");
}

TEST(HttpMessage, PathAndQuery) {
  HttpRequest request;
  request.target = "/a/b?x=1&y=2";
  EXPECT_EQ(request.Path(), "/a/b");
  EXPECT_EQ(request.Query(), "x=1&y=2");
  request.target = "/plain";
  EXPECT_EQ(request.Query(), "");
}

TEST(HttpMessage, ProblemJsonShape) {
  HttpResponse response =
      ProblemResponse(422, ProblemCode::kIdempotencyKeyMismatch, "differs", "op_9");
  EXPECT_EQ(response.status, 422);
  EXPECT_EQ(response.Header("Content-Type"), "application/problem+json");
  auto body = nlohmann::json::parse(response.body);
  EXPECT_EQ(body["code"], "idempotency_key_mismatch");
  EXPECT_EQ(body["status"], 422);
  EXPECT_EQ(body["title"], "Unprocessable Content");
  EXPECT_EQ(body["detail"], "differs");
  EXPECT_EQ(body["operation_id"], "op_9");
  EXPECT_EQ(body["type"], "urn:agentpay:problem:idempotency_key_mismatch");
}

TEST(HttpMessage, ProblemCodeNamesAreDistinct) {
  // The enumerators run from 0 to kPayeeNotAllowed, the last (docs.self_contained checks the
  // table).
  std::set<std::string_view> seen;
  for (int i = 0; i <= static_cast<int>(ProblemCode::kPayeeNotAllowed); ++i) {
    std::string_view name = ProblemCodeName(static_cast<ProblemCode>(i));
    EXPECT_FALSE(name.empty()) << "enumerator " << i;
    EXPECT_TRUE(seen.insert(name).second) << "duplicate code " << name;
  }
}

TEST(HttpMessage, ProblemJsonSurvivesInvalidUtf8) {
  HttpResponse response = ProblemResponse(400, ProblemCode::kBadRequest, "bad \xff\xfe bytes");
  EXPECT_NO_THROW(nlohmann::json::parse(response.body));
}

TEST(HttpResponseWire, StatusHeadersLengthAndBody) {
  HttpResponse response;
  response.status = 402;
  response.SetHeader("Content-Type", "application/json");
  response.SetHeader("AgentPay-Operation-Id", "op_1");
  response.body = "{\"a\":1}";
  EXPECT_EQ(SerializeResponse(response, true),
            "HTTP/1.1 402 Payment Required\r\nContent-Type: application/json\r\n"
            "AgentPay-Operation-Id: op_1\r\nContent-Length: 7\r\n\r\n{\"a\":1}");
  EXPECT_EQ(SerializeResponse(HttpResponse{}, false),
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

TEST(HttpResponseWire, NoBodyWhereHttpForbidsOne) {
  HttpResponse response;
  response.status = 204;
  response.body = "ignored";
  EXPECT_EQ(SerializeResponse(response, true), "HTTP/1.1 204 No Content\r\n\r\n");
  response.status = 304;
  EXPECT_EQ(SerializeResponse(response, true), "HTTP/1.1 304 Not Modified\r\n\r\n");
  // A handler that sets Content-Length answers a HEAD: its length, no body.
  response.status = 200;
  response.SetHeader("Content-Length", "42");
  EXPECT_EQ(SerializeResponse(response, true), "HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n");
}

TEST(HttpResponseWire, HeadersThatWouldSplitTheResponseAreDropped) {
  HttpResponse response;
  response.headers = {{"X-Ok", "fine"},
                      {"X-Bad", "a\r\nSet-Cookie: stolen=1"},
                      {"X-Bad\r\nInjected", "v"},
                      {"Bad Name", "v"},
                      {"", "v"},
                      {"Connection", "upgrade"},
                      {"Transfer-Encoding", "chunked"}};
  EXPECT_EQ(SerializeResponse(response, true),
            "HTTP/1.1 200 OK\r\nX-Ok: fine\r\nContent-Length: 0\r\n\r\n");
}

TEST(HttpUrl, Parses) {
  auto endpoint = ParseHttpUrl("http://127.0.0.1:9000/base/");
  ASSERT_TRUE(endpoint.ok());
  EXPECT_EQ(endpoint->host, "127.0.0.1");
  EXPECT_EQ(endpoint->port, 9000);
  EXPECT_EQ(endpoint->base_path, "/base");
  auto bare = ParseHttpUrl("http://example.test");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->port, 80);
  EXPECT_EQ(bare->base_path, "");
  for (const char* bad : {"https://", "https://x:0", "ftp://x", "http://", "http://x:0",
                          "http://x:70000", "http://x:12a", "x:80"}) {
    EXPECT_FALSE(ParseHttpUrl(bad).ok()) << bad;
  }
}

TEST(ListenAddress, Parses) {
  auto address = ParseListenAddress("127.0.0.1:8402");
  ASSERT_TRUE(address.ok());
  EXPECT_EQ(address->first, "127.0.0.1");
  EXPECT_EQ(address->second, 8402);
  auto v6 = ParseListenAddress("[::1]:0");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->first, "::1");
  for (const char* bad : {"8402", "host:", "h:99999", "h:-1"}) {
    EXPECT_FALSE(ParseListenAddress(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace agentpay
