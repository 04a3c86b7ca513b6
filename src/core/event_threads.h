// Event threads: the threads that serve many clients or payments from one loop (the HTTP server's
// I/O threads, the upstream client's thread, the timers' thread, a store's writer). One wait on
// the disk, the database, the chain or another server there stalls every client of that thread,
// so nothing that can wait may run on one (docs/architecture.md, "No event thread waits").
//
// Each event thread marks itself once, when it starts. Every call that can wait (a blocking store
// read, write or durability wait, a blocking HTTP or JSON-RPC exchange) begins with
// AssertMayBlock, the one place that enforces the rule: on a marked thread it aborts with the call
// and the thread's name (a broken invariant is a bug, DESIGN rule 3). Work that must wait goes to
// a thread that may (an Executor: the gateway's blocking pool, the chain pool), and its answer
// comes back by callback: Store::ReadAsync, Store::WriteAsync, Store::WhenDurable.
#pragma once

namespace agentpay {

// Marks the calling thread as an event thread named `name` (a string literal: it is kept) until
// the thread ends.
void MarkEventThread(const char* name);

// The calling thread's event-thread name, or nullptr on a thread that may block.
const char* EventThreadName();

// Aborts when the calling thread is an event thread: `call` (a string literal) is about to wait.
void AssertMayBlock(const char* call);

}  // namespace agentpay
