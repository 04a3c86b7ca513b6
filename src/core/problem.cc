// The problem+json body writer; see problem.h.
#include "core/problem.h"

#include <nlohmann/json.hpp>

namespace agentpay {

std::string_view StatusTitle(int status) {
  switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 421: return "Misdirected Request";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Status";
  }
}

std::string ProblemJson(int status, ProblemCode code, std::string_view detail,
                        std::string_view operation_id) {
  const std::string_view name = ProblemCodeName(code);
  nlohmann::json body = {
      {"type", "urn:agentpay:problem:" + std::string(name)},
      {"title", StatusTitle(status)},
      {"status", status},
      {"code", name},
      {"detail", detail},
  };
  if (!operation_id.empty()) body["operation_id"] = operation_id;
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace agentpay
