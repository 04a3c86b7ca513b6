#!/usr/bin/env python3
"""docs/real-chain.md, run as written on a local stand-in for Base Sepolia (issue 14, item 7).

The recipe's blocks need the internet, so `docs.blocks` skips them. Here they run in order in one
bash session (tests/docs/run_doc_blocks.py's runner, its rules and `expect` markers), against:
  - Anvil started with chain id 84532 and a block every second (Base makes one every 2 s), and
    TestUSDC deployed with Base Sepolia USDC's EIP-712 domain (name `USDC`, version `2`);
  - the settings block of §1 replaced by this node's URL, the token's address and a pay-to address;
  - after each key the recipe makes (relayer.key, buyer.key), a funded key written over it: the
    stand-in for the faucets (Anvil's account #4 has ETH for gas, #1 is minted USDC).
Every other block is the doc's own text. Afterwards the chain must show exactly one Transfer of the
price from the buyer to pay-to, and the settled payment's block at least 2 deep (--confirmations 2).

Run:  python3 tests/integration/test_real_chain_doc.py --agentpay build/agentpay
"""

import os
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "docs"))

import harness  # noqa: E402
import run_doc_blocks as R  # noqa: E402
import x402_harness as X  # noqa: E402

DOC = ROOT / "docs" / "real-chain.md"
PRICE = 1000
BUYER, PAY_TO, RELAYER = X.BUYER, X.PAY_TO, X.RELAYER


def funded_key(name, account):
    """A block that writes a funded key over the one the recipe just made (the faucet's stand-in)."""
    return R.Block(path="(test)", line=0, lang="sh",
                   text="printf '%%s\\n' '%s' > %s\n" % (account.private_key, name))


class RealChainRecipeTest(unittest.TestCase):
    def setUp(self):
        R.become_subreaper()
        self.node = X.A.Anvil(chain_id=X.CHAIN_ID, block_time=1).start()
        self.addCleanup(self.node.stop)
        rpc = self.node.rpc
        self.token = X.A.deploy_test_usdc(rpc, "USDC", "2")
        X.A.mint(rpc, self.token, BUYER.address, 10 ** 9)
        self.workdir = Path(tempfile.mkdtemp(prefix="agentpay-real-chain-"))
        self.addCleanup(shutil.rmtree, self.workdir, ignore_errors=True)

    def blocks(self):
        blocks = R.parse_blocks(DOC, "docs/real-chain.md")
        out = []
        settings_seen = 0
        for block in blocks:
            if block.lang != "sh":
                continue
            self.assertIsNotNone(block.skip, "%s:%d runs in docs.blocks, which has no chain" % (
                block.path, block.line))
            self.assertIn("integration.real_chain", block.skip)
            block.skip = None
            if block.text.startswith("RPC="):
                settings_seen += 1
                block.text = "RPC=%s\nUSDC=%s\nPAY_TO=%s\n" % (self.node.url, self.token, PAY_TO.address)
            out.append(block)
            if "> relayer.key" in block.text:
                out.append(funded_key("relayer.key", RELAYER))
            if "> buyer.key" in block.text:
                out.append(funded_key("buyer.key", BUYER))
        self.assertEqual(settings_seen, 1, "the settings block of section 1")
        self.assertEqual(sum(1 for b in out if b.path == "(test)"), 2, "both keys made and replaced")
        return out

    def test_the_recipe_pays_once_on_chain_84532(self):
        for port in R.DEFAULT_PORTS:
            self.assertFalse(R.port_in_use(port), "port %d is taken" % port)
        blocks = self.blocks()
        scratch = R.make_scratch(self.workdir, ROOT, Path(harness.binary()), 0)
        passed, failed, not_run, skipped = R.run_file(blocks, scratch, timeout_s=90)
        self.assertEqual((failed, not_run, skipped), (0, 0, 0), "see the failure printed above")
        self.assertEqual(passed, len(blocks))
        transfers = X.A.transfer_logs(self.node.rpc, self.token, from_=BUYER.address)
        self.assertEqual([(t["to"], t["value"]) for t in transfers], [(PAY_TO.address.lower(), PRICE)])
        receipt = self.node.rpc.receipt(transfers[0]["tx"])
        head = self.node.rpc.block_number()
        self.assertGreaterEqual(head - int(receipt["blockNumber"], 16) + 1, 2, "--confirmations 2")
        print("\n    recipe: %d blocks passed; the settlement used %d gas" % (
            passed, int(receipt["gasUsed"], 16)), file=sys.stderr)


if __name__ == "__main__":
    harness.main(sys.argv, before=X.A.anvil_binary)
