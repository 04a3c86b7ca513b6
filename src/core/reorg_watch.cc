#include "core/reorg_watch.h"

#include <algorithm>

#include "core/check.h"

namespace agentpay {

CanonicalBlocks::CanonicalBlocks(size_t max_entries) : max_entries_(max_entries) {
  AGENTPAY_CHECK(max_entries > 0);
}

void CanonicalBlocks::BeginPass() { vouch_from_ms_ = -1; }

CanonicalBlocks::Block& CanonicalBlocks::Listed(int64_t number, std::string_view hash,
                                                int64_t now_ms) {
  auto key = std::make_pair(number, std::string(hash));
  auto it = blocks_.find(key);
  if (it != blocks_.end()) return it->second;
  if (blocks_.size() >= max_entries_) blocks_.erase(blocks_.begin());  // the lowest
  return blocks_.emplace(std::move(key), Block{now_ms, -1}).first->second;
}

void CanonicalBlocks::Canonical(Block& block, int64_t now_ms) {
  block.canonical_ms = std::max(block.canonical_ms, now_ms);
  vouch_from_ms_ =
      vouch_from_ms_ < 0 ? block.first_listed_ms : std::min(vouch_from_ms_, block.first_listed_ms);
}

bool CanonicalBlocks::Vouched(int64_t number, std::string_view hash, int64_t now_ms) {
  Block& block = Listed(number, hash, now_ms);
  if (vouch_from_ms_ < 0 || block.canonical_ms < vouch_from_ms_) return false;
  Canonical(block, now_ms);
  return true;
}

void CanonicalBlocks::FoundCanonical(int64_t number, std::string_view hash, int64_t now_ms) {
  Canonical(Listed(number, hash, now_ms), now_ms);
}

}  // namespace agentpay
