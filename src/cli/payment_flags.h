// The flags that say how the agent client pays, shared by `agentpay pay` and `agentpay mcp`: the
// credential, the budget file, the attempts and timeouts, the spend controls, the chain and the
// CA file. One registration, one resolution, so that both commands read them alike.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "agentpay/client.h"
#include "core/result.h"

namespace agentpay {

struct PaymentFlags {
  client::PayOptions options;  // filled by the flags; url, method, body, headers and key aside
  std::string budget_text;
  std::string max_amount_text;
  std::string api_key_file, buyer_key_file;
  CLI::Option* api_key = nullptr;  // --api-key, where the command has it
};

// Registers them on `app`. `with_api_key_flag`: also --api-key KEY (a key on the command line is
// seen by other users of the machine in the process list: `pay` keeps it for scripts; `mcp` reads
// keys from files only).
void AddPaymentFlags(CLI::App& app, PaymentFlags& flags, bool with_api_key_flag);

// The text flags parsed and the key files read into flags.options. Errors: invalid_config, with
// the flag named.
Status ResolvePaymentFlags(PaymentFlags& flags);

}  // namespace agentpay
