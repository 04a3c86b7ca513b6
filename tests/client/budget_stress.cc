// Stress test of the budget file (integration.budget_stress): many OS processes, each a series of
// runs that open the file afresh as every `agentpay pay` does, on a machine kept busy by spinning
// processes. Each run claims, reserves, records a send and finishes a payment, or reads the whole
// file as `agentpay pay budget` does. Checked: no run fails (above all, no "database is locked"),
// every refusal is a budget refusal, and the file holds exactly what the runs say they did.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "agentpay/client.h"
#include "client/budget_db.h"

namespace agentpay::client {
namespace {

struct Options {
  int processes = 64;
  int runs = 20;      // per process
  int load = 4;       // spinning processes that keep the cores busy meanwhile
  int64_t total = 0;  // set from the above: a budget that roughly half the payments fit in
};

const BudgetAsset kAsset{84532, "0x5fbdb2315678afecb367f032d93f642f64180aa3", "USDC", 6};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Every fifth run reads the file instead of paying.
bool IsReadRun(int run) { return run % 5 == 4; }
int64_t AmountOf(int process, int run) { return 1 + (process * 7 + run) % 9; }
// Some payments end released (the key can be paid again), most spent.
bool EndsReleased(int process, int run) { return (process + run) % 4 == 0; }

using Clock = std::chrono::steady_clock;

// "error STEP after N ms: MESSAGE": how long the step took tells a lock timeout (the busy timeout
// of the budget file is 30 s) from a lock error that did not wait at all.
std::string Error(const char* step, Clock::time_point since, const Status& status) {
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since);
  return std::string("error ") + step + " after " + std::to_string(waited.count()) +
         " ms: " + status.ToString();
}

// One payment as `agentpay pay` makes it: open, claim the key, reserve, count the send, finish.
// Returns the line the parent checks: "reserved KEY AMOUNT STATE", "refused KEY" or "error ...".
std::string PayOnce(const std::string& path, int64_t total, int process, int run) {
  const std::string key = "p" + std::to_string(process) + "-r" + std::to_string(run);
  Clock::time_point step = Clock::now();
  auto budget = BudgetDb::Open(path, total, NowMs());
  if (!budget.ok()) return Error("open", step, budget.status());
  const int64_t lease_until = NowMs() + 60'000;
  step = Clock::now();
  auto claim = (*budget)->ClaimExisting(key, "fp-" + key, NowMs(), lease_until);
  if (!claim.ok()) return Error("claim", step, claim.status());
  if (claim->kind != ClaimKind::kNeedsPrice) return "error claim kind of a new key";
  StoredReservation wanted;
  wanted.key = key;
  wanted.fingerprint = "fp-" + key;
  wanted.method = "GET";
  wanted.url = "http://127.0.0.1:1/stress";
  wanted.amount = AmountOf(process, run);
  wanted.scheme = "wallet";
  auto sign = [](StoredReservation&) { return Status::Ok(); };
  step = Clock::now();
  auto reserved = (*budget)->Reserve(wanted, kAsset, sign, NowMs(), lease_until);
  if (!reserved.ok()) return Error("reserve", step, reserved.status());
  switch (reserved->kind) {
    case ClaimKind::kOverBudget:
      return "refused " + key;
    case ClaimKind::kReserved:
      break;
    case ClaimKind::kResume:
    case ClaimKind::kMismatch:
    case ClaimKind::kNeedsPrice:
    case ClaimKind::kAssetMismatch:
      return "error reserve kind " + std::to_string(static_cast<int>(reserved->kind));
  }
  step = Clock::now();
  if (Status s = (*budget)->RecordSend(key, NowMs()); !s.ok()) return Error("send", step, s);
  const ReservationState learned =
      EndsReleased(process, run) ? ReservationState::kReleased : ReservationState::kSpent;
  step = Clock::now();
  auto finished = (*budget)->Finish(key, learned, "", NowMs());
  if (!finished.ok()) return Error("finish", step, finished.status());
  return "reserved " + key + " " + std::to_string(wanted.amount) + " " +
         std::string(ReservationStateName(finished->state));
}

// The whole file as `agentpay pay budget` reads it (the public library): its figures must agree
// with its own rows and stay within the total.
std::string ReadOnce(const std::string& path) {
  const Clock::time_point step = Clock::now();
  const BudgetReport report = ReadBudget(path);
  if (!report.error.empty())
    return Error("read", step, Status::Error(ErrorCode::kStoreError, report.error));
  int64_t committed = 0, spent = 0;
  for (const Reservation& r : report.reservations) {
    if (r.state != "released") committed += r.amount;
    if (r.state == "spent") spent += r.amount;
  }
  if (committed != report.committed || spent != report.spent || report.committed > report.total) {
    std::ostringstream out;
    out << "error read figures: committed " << report.committed << " spent " << report.spent
        << " total " << report.total << ", rows say committed " << committed << " spent " << spent;
    return out.str();
  }
  return "read";
}

// A child: waits at the gate so that all start at once, then its runs; one line each on `out`.
[[noreturn]] void Child(const Options& options, const std::string& path, int process, int gate,
                        int out) {
  char go;
  (void)!::read(gate, &go, 1);  // returns at EOF, when the parent closes the gate
  std::string lines;
  for (int run = 0; run < options.runs; ++run) {
    const Clock::time_point started = Clock::now();
    // The first run of every process pays, so that the racing processes create the file.
    const std::string line =
        IsReadRun(run) ? ReadOnce(path) : PayOnce(path, options.total, process, run);
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
    lines += std::to_string(took.count()) + " " + line + "\n";  // "MS LINE"
  }
  const char* data = lines.data();
  size_t left = lines.size();
  while (left > 0) {
    ssize_t written = ::write(out, data, left);
    if (written <= 0) _exit(2);
    data += written;
    left -= static_cast<size_t>(written);
  }
  _exit(0);
}

// Processes that only spin, so that the runs share the cores with other work: a lock holder gets
// descheduled in the middle of its transaction, as on a loaded machine.
std::vector<pid_t> StartLoad(int count) {
  std::vector<pid_t> pids;
  for (int i = 0; i < count; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the test, however it ends
      std::atomic<uint64_t> spins{0};
      for (;;) spins.fetch_add(1, std::memory_order_relaxed);
    }
    if (pid > 0) pids.push_back(pid);
  }
  return pids;
}

void StopLoad(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) ::kill(pid, SIGKILL);
  for (pid_t pid : pids) ::waitpid(pid, nullptr, 0);
}

std::string ReadAll(int fd) {
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, n);
  return text;
}

struct Outcome {
  std::map<std::string, std::pair<int64_t, std::string>> reserved;  // key -> amount, state
  int refused = 0, reads = 0;
  std::vector<std::string> errors;
  std::vector<int64_t> run_ms;  // how long each run took, waits for the file included
};

// Runs every child against `path` and gathers what they say they did.
Outcome RunChildren(const Options& options, const std::string& path) {
  int gate[2];
  if (::pipe(gate) != 0) std::abort();
  std::vector<std::pair<pid_t, int>> children;
  for (int p = 0; p < options.processes; ++p) {
    int out[2];
    if (::pipe(out) != 0) std::abort();
    pid_t pid = fork();
    if (pid < 0) std::abort();
    if (pid == 0) {
      ::close(gate[1]);
      ::close(out[0]);
      Child(options, path, p, gate[0], out[1]);
    }
    ::close(out[1]);
    children.emplace_back(pid, out[0]);
  }
  ::close(gate[0]);
  ::close(gate[1]);  // every child starts now
  Outcome outcome;
  for (auto [pid, fd] : children) {
    std::istringstream lines(ReadAll(fd));
    ::close(fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      outcome.errors.push_back("a child died: status " + std::to_string(status));
    }
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::string what, key, state;
      int64_t amount = 0, took_ms = 0;
      words >> took_ms >> what;
      outcome.run_ms.push_back(took_ms);
      if (what == "reserved" && (words >> key >> amount >> state)) {
        outcome.reserved[key] = {amount, state};
      } else if (what == "refused") {
        ++outcome.refused;
      } else if (what == "read") {
        ++outcome.reads;
      } else {
        outcome.errors.push_back(line);
      }
    }
  }
  return outcome;
}

// The file against the runs' own account: the same rows in the same states, the sums exact.
std::vector<std::string> Audit(const Options& options, const std::string& path,
                               const Outcome& outcome) {
  std::vector<std::string> problems;
  auto budget = BudgetDb::OpenExisting(path);
  if (!budget.ok()) return {"cannot open the file to audit it: " + budget.status().message()};
  auto rows = (*budget)->List();
  auto figures = (*budget)->Figures();
  if (!rows.ok() || !figures.ok()) return {"cannot read the file to audit it"};
  int64_t committed = 0;
  for (const auto& [key, reservation] : outcome.reserved) {
    if (reservation.second == "spent") committed += reservation.first;
  }
  if (rows->size() != outcome.reserved.size()) {
    problems.push_back("the file holds " + std::to_string(rows->size()) +
                       " reservations, the runs made " + std::to_string(outcome.reserved.size()));
  }
  for (const StoredReservation& row : *rows) {
    auto found = outcome.reserved.find(row.key);
    const std::string state(ReservationStateName(row.state));
    if (found == outcome.reserved.end() || found->second.first != row.amount ||
        found->second.second != state) {
      problems.push_back("reservation " + row.key + " (" + state + ", " +
                         std::to_string(row.amount) + ") is not what its run made");
    }
  }
  if (figures->committed != committed || figures->spent != committed) {
    problems.push_back("the file counts " + std::to_string(figures->committed) +
                       " committed, the runs spent " + std::to_string(committed));
  }
  if (figures->committed > figures->total || figures->total != options.total) {
    problems.push_back("committed " + std::to_string(figures->committed) + " against a total of " +
                       std::to_string(figures->total));
  }
  const int payments = options.processes * (options.runs - options.runs / 5);
  if (static_cast<int>(outcome.reserved.size()) + outcome.refused != payments) {
    problems.push_back("not every payment run reserved or was refused for the budget");
  }
  if (outcome.refused == 0 || outcome.reserved.empty()) {
    problems.push_back("the budget should both take and refuse payments in this test");
  }
  return problems;
}

// One variant: `fresh` leaves the file to the racing processes to create.
bool RunVariant(const Options& options, const std::string& dir, bool fresh) {
  const std::string path = dir + (fresh ? "/fresh.db" : "/existing.db");
  if (!fresh && !BudgetDb::Open(path, options.total, NowMs()).ok()) {
    std::fprintf(stderr, "cannot create %s\n", path.c_str());
    return false;
  }
  const Clock::time_point started = Clock::now();
  const Outcome outcome = RunChildren(options, path);
  const std::chrono::duration<double> seconds = Clock::now() - started;
  std::vector<std::string> problems = outcome.errors;
  for (std::string& problem : Audit(options, path, outcome)) problems.push_back(problem);
  std::vector<int64_t> run_ms = outcome.run_ms;
  std::sort(run_ms.begin(), run_ms.end());
  const int64_t slowest = run_ms.empty() ? 0 : run_ms.back();
  const int64_t p99 = run_ms.empty() ? 0 : run_ms[run_ms.size() * 99 / 100];
  std::printf(
      "%s file: %d processes x %d runs in %.1f s: %zu reserved, %d refused for the budget, "
      "%d reads, %zu problems; the slowest run took %lld ms (99th percentile %lld ms)\n",
      fresh ? "new" : "existing", options.processes, options.runs, seconds.count(),
      outcome.reserved.size(), outcome.refused, outcome.reads, problems.size(),
      static_cast<long long>(slowest), static_cast<long long>(p99));
  for (size_t i = 0; i < problems.size() && i < 20; ++i) {
    std::printf("  problem: %s\n", problems[i].c_str());
  }
  return problems.empty();
}

int Main(int argc, char** argv) {
  Options options;
  const std::map<std::string, int*> flags = {
      {"--processes", &options.processes}, {"--runs", &options.runs}, {"--load", &options.load}};
  for (int i = 1; i < argc; i += 2) {
    auto flag = flags.find(argv[i]);
    if (flag == flags.end() || i + 1 == argc) {
      std::fprintf(stderr, "usage: %s [--processes N] [--runs N] [--load N]\n", argv[0]);
      return 2;
    }
    *flag->second = std::atoi(argv[i + 1]);
  }
  if (options.processes < 1 || options.processes > 500 || options.runs < 1 || options.load < 0) {
    std::fprintf(stderr, "--processes 1..500, --runs >= 1, --load >= 0\n");
    return 2;
  }
  // About half of what the payment runs ask for (amounts average 5).
  options.total = int64_t{options.processes} * options.runs * 2;
  // $TMPDIR or /tmp: a disk whose fsync takes the time a user's does (tmpfs would hide it).
  std::string pattern = std::filesystem::temp_directory_path() / "agentpay-budget-stress-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return 2;
  const std::string dir = pattern;
  const std::vector<pid_t> load = StartLoad(options.load);
  bool ok = RunVariant(options, dir, /*fresh=*/true);
  ok = RunVariant(options, dir, /*fresh=*/false) && ok;
  StopLoad(load);
  std::filesystem::remove_all(dir);
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace agentpay::client

int main(int argc, char** argv) { return agentpay::client::Main(argc, argv); }
