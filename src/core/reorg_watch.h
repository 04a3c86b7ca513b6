// The reconciler's watch for reorganisations: which blocks holding recorded settlements it must
// ask the node about, and which a block the node just called canonical vouches for without a call.
// Pure: time comes in as arguments (one clock: the watch's own).
//
// A block that is canonical now vouches for a lower block only if it descends from it, and it does
// when both were canonical at one moment. Block X, canonical now, was canonical all the way from
// the moment the watch first listed it (its settlement was recorded from a receipt in it before
// that): a block that leaves the canonical chain does not come back with the same hash. So a lower
// block R last found canonical at or after X was first listed was canonical at the same moment as
// X, is X's ancestor, and is canonical now. Height order alone is not enough: a settlement recorded
// after a reorganisation, in a block of the new branch, says nothing of one recorded before it in
// a block the reorganisation removed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace agentpay {

class CanonicalBlocks {
 public:
  // At most max_entries blocks are remembered (the lowest go first); one forgotten is asked about
  // again. Precondition: max_entries > 0.
  explicit CanonicalBlocks(size_t max_entries);

  // A pass goes through the listed blocks in descending height order after BeginPass.
  void BeginPass();
  // Whether the listed block (number, hash) is canonical now by what this pass found so far (then
  // it counts as found canonical now); if not, the node must be asked.
  bool Vouched(int64_t number, std::string_view hash, int64_t now_ms);
  // The node said the block's canonical hash is `hash` now.
  void FoundCanonical(int64_t number, std::string_view hash, int64_t now_ms);
  size_t size() const { return blocks_.size(); }

 private:
  struct Block {
    int64_t first_listed_ms = 0;
    int64_t canonical_ms = -1;  // last found canonical; -1: never
  };
  Block& Listed(int64_t number, std::string_view hash, int64_t now_ms);
  void Canonical(Block& block, int64_t now_ms);

  size_t max_entries_;
  std::map<std::pair<int64_t, std::string>, Block, std::less<>> blocks_;
  // The earliest first listing of the blocks found canonical now in this pass; -1: none yet.
  int64_t vouch_from_ms_ = -1;
};

}  // namespace agentpay
