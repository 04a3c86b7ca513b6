/* The AgentPay agent client as a C ABI: the library behind `agentpay pay`
 * (include/agentpay/client.h) for other languages (the Python package binds it with ctypes).
 * Every call takes and returns UTF-8 JSON text, the same objects `agentpay pay --json`,
 * `agentpay pay budget --json` and `agentpay pay reconcile --json` print. A returned string is the
 * caller's: free it with agentpay_free. No call throws or aborts on any input: a bad argument is
 * an answer {"exit_code": 1, "outcome": "error", "message": ...} (pay) or {"error": ...}.
 * Every call may be made from any thread, concurrently; calls sharing a budget file coordinate
 * through it, across threads and processes. */
#ifndef AGENTPAY_CLIENT_C_H
#define AGENTPAY_CLIENT_C_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One line of progress in plain words (UTF-8, not NUL-terminated: `size` bytes), and the
 * `context` given with it. Called on the calling thread, before the call returns. May be NULL. */
typedef void (*agentpay_progress_fn)(const char* line, uint64_t size, void* context);

/* Pays for one request (client::Pay). `options_json`: the PayOptions fields by name
 * ("url", "method", "body" or "body_base64", "headers": [[name, value], ...], "api_key" or
 * "buyer_key", "task", "step", "idempotency_key", "budget_db", "budget", "max_attempts",
 * "timeout_ms", "attempt_timeout_ms", "x402_version", "assets", "networks", "payees",
 * "max_amount", "chain_rpc", "ca_file"). Returns the result object with "body_base64" and
 * "response_headers" besides `pay --json`'s fields. */
char* agentpay_pay(const char* options_json, agentpay_progress_fn progress, void* context);

/* The budget file's state (client::ReadBudget): `pay budget --json`'s object, or {"error": ...}. */
char* agentpay_budget(const char* budget_db);

/* Settles the reservations whose outcome is not known (client::Reconcile). `options_json`:
 * "budget_db", "chain_rpc", "ca_file", "api_key", "expiry_buffer_seconds", "timeout_ms".
 * Returns `pay reconcile --json`'s object, or {"error": ...}. */
char* agentpay_reconcile(const char* options_json, agentpay_progress_fn progress, void* context);

/* The idempotency key of step `step` of `task` for the payer holding `credential`
 * (client::DeriveKey). */
char* agentpay_derive_key(const char* credential, const char* task, uint64_t step);

/* Frees a string an agentpay_* call returned. NULL is ignored. */
void agentpay_free(char* text);

/* This library's version, e.g. "0.39.0" (static storage: do not free). */
const char* agentpay_version(void);

#ifdef __cplusplus
}
#endif

#endif /* AGENTPAY_CLIENT_C_H */
