// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title Multicall3Lite
/// @notice The two read-batching entry points of Multicall3 that off-chain code calls, written for
/// AgentPay's tests. Anvil has no contract at the canonical Multicall3 address
/// (0xcA11bde05977b3631167028862bE2a173976CA11); the x402 reference facilitator (the npm package x402 evm) calls
/// tryAggregate there to diagnose a failed simulation (nonce used, balance, token name/version).
/// Without it every such failure is reported as "invalid_exact_evm_transaction_simulation_failed".
/// anvil.py's install_multicall3() puts this runtime code at that address with anvil_setCode.
contract Multicall3Lite {
    struct Call {
        address target;
        bytes callData;
    }

    struct Call3 {
        address target;
        bool allowFailure;
        bytes callData;
    }

    struct Result {
        bool success;
        bytes returnData;
    }

    function tryAggregate(bool requireSuccess, Call[] calldata calls) public payable returns (Result[] memory returnData) {
        returnData = new Result[](calls.length);
        for (uint256 i = 0; i < calls.length; i++) {
            (bool success, bytes memory ret) = calls[i].target.call(calls[i].callData);
            if (requireSuccess) require(success, "Multicall3: call failed");
            returnData[i] = Result(success, ret);
        }
    }

    function aggregate3(Call3[] calldata calls) public payable returns (Result[] memory returnData) {
        returnData = new Result[](calls.length);
        for (uint256 i = 0; i < calls.length; i++) {
            (bool success, bytes memory ret) = calls[i].target.call(calls[i].callData);
            require(success || calls[i].allowFailure, "Multicall3: call failed");
            returnData[i] = Result(success, ret);
        }
    }

    function getBlockNumber() public view returns (uint256) {
        return block.number;
    }

    function getCurrentBlockTimestamp() public view returns (uint256) {
        return block.timestamp;
    }

    function getChainId() public view returns (uint256) {
        return block.chainid;
    }
}
