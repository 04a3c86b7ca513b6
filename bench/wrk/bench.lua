-- wrk script for bench/wallet_vs_nginx.sh. Every scenario sends the same request shape:
--   POST $BENCH_PATH, Content-Type: application/json, Authorization: Bearer $BENCH_API_KEY,
--   Idempotency-Key: <key>, body $BENCH_BODY
-- so nginx, the paid path and the replay path get byte-for-byte comparable requests and wrk does the
-- same work per request. Only the key sequence differs:
--   BENCH_MODE=unique  key = $BENCH_KEY_PREFIX-t<thread>-<n>: never repeats (paid, and the nginx run)
--   BENCH_MODE=replay  key = $BENCH_KEY_PREFIX-r-<i>, i cycling over 0..$BENCH_REPLAY_KEYS-1: keys
--                      the script paid for beforehand, so every answer should be a replay
--   BENCH_MODE=unpaid  as unique, but without the Authorization header: every answer should be the
--                      402 challenge (counted as the expected answer, like a 2xx)
-- BENCH_API_KEYS (comma-separated), when set, replaces BENCH_API_KEY: request n of a thread pays
-- with key n mod count, so the load spreads over several accounts (bench/postgres_vs_sqlite.py).
-- BENCH_DELAY_MS, when set, paces each connection: after an answer it waits a random 0 to 2 x that
-- many milliseconds (that on average; random, so that the connections do not stay in step and send
-- their requests in bursts) before its next request, so C connections offer about
-- C * 1000 / (delay + latency) requests/s (bench/postgres_vs_sqlite.py --paced).
-- The response hook counts 2xx / non-2xx (by status) and the Idempotent-Replayed header; done()
-- prints one "BENCH_RESULT k=v ..." line that the shell script parses.

local mode = os.getenv("BENCH_MODE") or "unique"
local api_key = os.getenv("BENCH_API_KEY") or "none"
local api_keys = {}
for k in string.gmatch(os.getenv("BENCH_API_KEYS") or "", "[^,]+") do table.insert(api_keys, k) end
local prefix = os.getenv("BENCH_KEY_PREFIX") or "bench"
local replay_keys = tonumber(os.getenv("BENCH_REPLAY_KEYS") or "100")
local path = os.getenv("BENCH_PATH") or "/bench"
local body = os.getenv("BENCH_BODY") or '{"query":"bench"}'
local delay_ms = tonumber(os.getenv("BENCH_DELAY_MS") or "")
if delay_ms then
  function delay() return math.random(0, 2 * delay_ms) end
end

if mode ~= "unique" and mode ~= "replay" and mode ~= "unpaid" then
  error("BENCH_MODE must be unique, replay or unpaid, got " .. mode)
end
-- The answer a scenario expects: a 2xx, or (unpaid) exactly 402; ok2xx counts those.
local function expected(status)
  if mode == "unpaid" then return status == 402 end
  return status >= 200 and status < 300
end

-- Main state: remember the threads so done() can collect their counters.
local threads = {}
local thread_count = 0

function setup(thread)
  thread:set("thread_id", thread_count)
  thread_count = thread_count + 1
  table.insert(threads, thread)
end

-- Thread state.
function init(args)
  math.randomseed(os.time() + thread_id)
  counter = 0
  ok2xx = 0
  non2xx = 0
  replayed = 0      -- Idempotent-Replayed: true
  fresh = 0         -- Idempotent-Replayed: false
  statuses = {}     -- non-2xx status -> count
  headers = {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer " .. api_key,
  }
  if mode == "unpaid" then headers["Authorization"] = nil end
  key_base = prefix .. "-t" .. thread_id .. "-"
end

function request()
  local key
  if mode == "replay" then
    key = prefix .. "-r-" .. ((counter + thread_id * 7) % replay_keys)
  else
    key = key_base .. counter
  end
  if #api_keys > 0 and mode ~= "unpaid" then
    headers["Authorization"] = "Bearer " .. api_keys[(counter % #api_keys) + 1]
  end
  counter = counter + 1
  headers["Idempotency-Key"] = key
  return wrk.format("POST", path, headers, body)
end

function response(status, hdrs, resp_body)
  if expected(status) then
    ok2xx = ok2xx + 1
  else
    non2xx = non2xx + 1
    statuses[status] = (statuses[status] or 0) + 1
  end
  local flag = hdrs["Idempotent-Replayed"] or hdrs["idempotent-replayed"]
  if flag == "true" then
    replayed = replayed + 1
  elseif flag == "false" then
    fresh = fresh + 1
  end
end

function done(summary, latency, requests)
  local ok, bad, rep, fr = 0, 0, 0, 0
  local by_status = {}
  for _, thread in ipairs(threads) do
    ok = ok + thread:get("ok2xx")
    bad = bad + thread:get("non2xx")
    rep = rep + thread:get("replayed")
    fr = fr + thread:get("fresh")
    local s = thread:get("statuses")
    if type(s) == "table" then
      for code, n in pairs(s) do by_status[code] = (by_status[code] or 0) + n end
    end
  end
  local parts = {}
  for code, n in pairs(by_status) do table.insert(parts, tostring(code) .. ":" .. tostring(n)) end
  table.sort(parts)
  local e = summary.errors
  io.write(string.format(
    "BENCH_RESULT requests=%d duration_us=%d ok2xx=%d non2xx=%d replayed=%d fresh=%d " ..
    "sock_connect=%d sock_read=%d sock_write=%d sock_timeout=%d " ..
    "lat_p50_us=%d lat_p99_us=%d lat_max_us=%d statuses=%s\n",
    summary.requests, summary.duration, ok, bad, rep, fr,
    e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max,
    #parts > 0 and table.concat(parts, ",") or "-"))
end
