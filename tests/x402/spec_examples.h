// The base64 examples published in the x402 specification (specs/transports-v2/http.md and
// specs/transports-v1/http.md in x402-foundation/x402), with the EIP-712 vector they carry, and
// small helpers shared by the x402 tests.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <string_view>

#include "x402/base64.h"
#include "x402/wire.h"

namespace agentpay::x402::spec {

// v2 PAYMENT-REQUIRED: error "PAYMENT-SIGNATURE header is required", one `exact` requirement.
inline constexpr std::string_view kPaymentRequired =
    "eyJ4NDAyVmVyc2lvbiI6MiwiZXJyb3IiOiJQQVlNRU5ULVNJR05BVFVSRSBoZWFkZXIgaXMgcmVxdWlyZWQiLCJyZXNvdX"
    "JjZSI6eyJ1cmwiOiJodHRwczovL2FwaS5leGFtcGxlLmNvbS9wcmVtaXVtLWRhdGEiLCJkZXNjcmlwdGlvbiI6IkFjY2Vz"
    "cyB0byBwcmVtaXVtIG1hcmtldCBkYXRhIiwibWltZVR5cGUiOiJhcHBsaWNhdGlvbi9qc29uIn0sImFjY2VwdHMiOlt7In"
    "NjaGVtZSI6ImV4YWN0IiwibmV0d29yayI6ImVpcDE1NTo4NDUzMiIsImFtb3VudCI6IjEwMDAwIiwiYXNzZXQiOiIweDAz"
    "NkNiRDUzODQyYzU0MjY2MzRlNzkyOTU0MWVDMjMxOGYzZENGN2UiLCJwYXlUbyI6IjB4MjA5NjkzQmM2YWZjMEM1MzI4Yk"
    "EzNkZhRjAzQzUxNEVGMzEyMjg3QyIsIm1heFRpbWVvdXRTZWNvbmRzIjo2MCwiZXh0cmEiOnsibmFtZSI6IlVTREMiLCJ2"
    "ZXJzaW9uIjoiMiJ9fV19";

// v2 PAYMENT-SIGNATURE answering it, signed by 0x857b…6b66 (the EIP-712 vector of NOTES.md).
inline constexpr std::string_view kPaymentSignature =
    "eyJ4NDAyVmVyc2lvbiI6MiwicmVzb3VyY2UiOnsidXJsIjoiaHR0cHM6Ly9hcGkuZXhhbXBsZS5jb20vcHJlbWl1bS1kYX"
    "RhIiwiZGVzY3JpcHRpb24iOiJBY2Nlc3MgdG8gcHJlbWl1bSBtYXJrZXQgZGF0YSIsIm1pbWVUeXBlIjoiYXBwbGljYXRp"
    "b24vanNvbiJ9LCJhY2NlcHRlZCI6eyJzY2hlbWUiOiJleGFjdCIsIm5ldHdvcmsiOiJlaXAxNTU6ODQ1MzIiLCJhbW91bn"
    "QiOiIxMDAwMCIsImFzc2V0IjoiMHgwMzZDYkQ1Mzg0MmM1NDI2NjM0ZTc5Mjk1NDFlQzIzMThmM2RDRjdlIiwicGF5VG8i"
    "OiIweDIwOTY5M0JjNmFmYzBDNTMyOGJBMzZGYUYwM0M1MTRFRjMxMjI4N0MiLCJtYXhUaW1lb3V0U2Vjb25kcyI6NjAsIm"
    "V4dHJhIjp7Im5hbWUiOiJVU0RDIiwidmVyc2lvbiI6IjIifX0sInBheWxvYWQiOnsic2lnbmF0dXJlIjoiMHgyZDZhNzU4"
    "OGQ2YWNjYTUwNWNiZjBkOWE0YTIyN2UwYzUyYzZjMzQwMDhjOGU4OTg2YTEyODMyNTk3NjQxNzM2MDhhMmNlNjQ5NjY0Mm"
    "UzNzdkNmRhOGRiYmY1ODM2ZTliZDE1MDkyZjllY2FiMDVkZWQzZDYyOTNhZjE0OGI1NzFjIiwiYXV0aG9yaXphdGlvbiI6"
    "eyJmcm9tIjoiMHg4NTdiMDY1MTlFOTFlM0E1NDUzODc5MWJEYmIwRTIyMzczZTM2YjY2IiwidG8iOiIweDIwOTY5M0JjNm"
    "FmYzBDNTMyOGJBMzZGYUYwM0M1MTRFRjMxMjI4N0MiLCJ2YWx1ZSI6IjEwMDAwIiwidmFsaWRBZnRlciI6IjE3NDA2NzIw"
    "ODkiLCJ2YWxpZEJlZm9yZSI6IjE3NDA2NzIxNTQiLCJub25jZSI6IjB4ZjM3NDY2MTNjMmQ5MjBiNWZkYWJjMDg1NmYyYW"
    "ViMmQ0Zjg4ZWU2MDM3YjhjYzVkMDRhNzFhNDQ2MmYxMzQ4MCJ9fX0=";

// v1 X-PAYMENT with the same authorization on network "base-sepolia".
inline constexpr std::string_view kXPayment =
    "eyJ4NDAyVmVyc2lvbiI6MSwic2NoZW1lIjoiZXhhY3QiLCJuZXR3b3JrIjoiYmFzZS1zZXBvbGlhIiwicGF5bG9hZCI6ey"
    "JzaWduYXR1cmUiOiIweDJkNmE3NTg4ZDZhY2NhNTA1Y2JmMGQ5YTRhMjI3ZTBjNTJjNmMzNDAwOGM4ZTg5ODZhMTI4MzI1"
    "OTc2NDE3MzYwOGEyY2U2NDk2NjQyZTM3N2Q2ZGE4ZGJiZjU4MzZlOWJkMTUwOTJmOWVjYWIwNWRlZDNkNjI5M2FmMTQ4Yj"
    "U3MWMiLCJhdXRob3JpemF0aW9uIjp7ImZyb20iOiIweDg1N2IwNjUxOUU5MWUzQTU0NTM4NzkxYkRiYjBFMjIzNzNlMzZi"
    "NjYiLCJ0byI6IjB4MjA5NjkzQmM2YWZjMEM1MzI4YkEzNkZhRjAzQzUxNEVGMzEyMjg3QyIsInZhbHVlIjoiMTAwMDAiLC"
    "J2YWxpZEFmdGVyIjoiMTc0MDY3MjA4OSIsInZhbGlkQmVmb3JlIjoiMTc0MDY3MjE1NCIsIm5vbmNlIjoiMHhmMzc0NjYx"
    "M2MyZDkyMGI1ZmRhYmMwODU2ZjJhZWIyZDRmODhlZTYwMzdiOGNjNWQwNGE3MWE0NDYyZjEzNDgwIn19fQ==";

// PAYMENT-RESPONSE / X-PAYMENT-RESPONSE, success and failure.
inline constexpr std::string_view kPaymentResponseSuccess =
    "eyJzdWNjZXNzIjp0cnVlLCJ0cmFuc2FjdGlvbiI6IjB4MTIzNDU2Nzg5MGFiY2RlZjEyMzQ1Njc4OTBhYmNkZWYxMjM0NT"
    "Y3ODkwYWJjZGVmMTIzNDU2Nzg5MGFiY2RlZiIsIm5ldHdvcmsiOiJlaXAxNTU6ODQ1MzIiLCJwYXllciI6IjB4ODU3YjA2"
    "NTE5RTkxZTNBNTQ1Mzg3OTFiRGJiMEUyMjM3M2UzNmI2NiJ9";
inline constexpr std::string_view kPaymentResponseFailure =
    "eyJzdWNjZXNzIjpmYWxzZSwiZXJyb3JSZWFzb24iOiJpbnN1ZmZpY2llbnRfZnVuZHMiLCJ0cmFuc2FjdGlvbiI6IiIsIm"
    "5ldHdvcmsiOiJlaXAxNTU6ODQ1MzIiLCJwYXllciI6IjB4ODU3YjA2NTE5RTkxZTNBNTQ1Mzg3OTFiRGJiMEUyMjM3M2Uz"
    "NmI2NiJ9";
inline constexpr std::string_view kXPaymentResponseSuccess =
    "eyJzdWNjZXNzIjp0cnVlLCJ0cmFuc2FjdGlvbiI6IjB4MTIzNDU2Nzg5MGFiY2RlZjEyMzQ1Njc4OTBhYmNkZWYxMjM0NT"
    "Y3ODkwYWJjZGVmMTIzNDU2Nzg5MGFiY2RlZiIsIm5ldHdvcmsiOiJiYXNlLXNlcG9saWEiLCJwYXllciI6IjB4ODU3YjA2"
    "NTE5RTkxZTNBNTQ1Mzg3OTFiRGJiMEUyMjM3M2UzNmI2NiJ9";
inline constexpr std::string_view kXPaymentResponseFailure =
    "eyJzdWNjZXNzIjpmYWxzZSwiZXJyb3JSZWFzb24iOiJpbnN1ZmZpY2llbnRfZnVuZHMiLCJ0cmFuc2FjdGlvbiI6IiIsIm"
    "5ldHdvcmsiOiJiYXNlLXNlcG9saWEiLCJwYXllciI6IjB4ODU3YjA2NTE5RTkxZTNBNTQ1Mzg3OTFiRGJiMEUyMjM3M2Uz"
    "NmI2NiJ9";

inline constexpr std::string_view kAsset = "0x036CbD53842c5426634e7929541eC2318f3dCF7e";
inline constexpr std::string_view kPayTo = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C";
inline constexpr std::string_view kPayer = "0x857b06519E91e3A54538791bDbb0E22373e36b66";
inline constexpr std::string_view kNonce =
    "0xf3746613c2d920b5fdabc0856f2aeb2d4f88ee6037b8cc5d04a71a4462f13480";
inline constexpr std::string_view kSignature =
    "0x2d6a7588d6acca505cbf0d9a4a227e0c52c6c34008c8e8986a1283259764173608a2ce6496642e377d6da8dbbf58"
    "36e9bd15092f9ecab05ded3d6293af148b571c";
inline constexpr std::string_view kDigest =
    "0xf256992871671abcb27ff92885a7afa46218724e5fc0bac35d050115aa1d22e6";
inline constexpr uint64_t kValidAfter = 1740672089;
inline constexpr uint64_t kValidBefore = 1740672154;
// Inside the window with the 6 s buffer: validAfter ≤ now and now + 6 ≤ validBefore.
inline constexpr int64_t kNowInWindow = 1740672100;

inline Address AddressOf(std::string_view text) {
  Result<Address> address = chain::ParseAddress(text);
  EXPECT_TRUE(address.ok()) << text;
  return address.ok() ? *address : Address{};
}

// What the spec's 402 asks for: USDC / 2 / 84532 / 0x036C…, 10000 to 0x2096…, 60 s.
inline Requirements SpecRequirements() {
  Requirements requirements;
  requirements.chain_id = 84532;
  requirements.network = V2Network(84532);
  requirements.amount = U256(10000);
  requirements.asset = AddressOf(kAsset);
  requirements.pay_to = AddressOf(kPayTo);
  requirements.max_timeout_seconds = 60;
  requirements.asset_name = "USDC";
  requirements.asset_version = "2";
  requirements.resource_url = "https://api.example.com/premium-data";
  requirements.description = "Access to premium market data";
  requirements.mime_type = "application/json";
  return requirements;
}

// The JSON inside a base64 header (fails the test, returning null, when it is not).
inline nlohmann::json JsonOf(std::string_view header) {
  Result<std::string> text = Base64Decode(header);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  if (!text.ok()) return nullptr;
  return nlohmann::json::parse(*text, nullptr, false);
}

// header with its JSON changed by `mutate`, re-encoded.
inline std::string Mutated(std::string_view header,
                           const std::function<void(nlohmann::json&)>& mutate) {
  nlohmann::json json = JsonOf(header);
  mutate(json);
  return Base64Encode(json.dump());
}

}  // namespace agentpay::x402::spec
