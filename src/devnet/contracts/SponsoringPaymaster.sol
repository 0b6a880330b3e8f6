// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {BasePaymaster} from "@account-abstraction/contracts/core/BasePaymaster.sol";
import {IEntryPoint} from "@account-abstraction/contracts/interfaces/IEntryPoint.sol";
import {PackedUserOperation} from "@account-abstraction/contracts/interfaces/PackedUserOperation.sol";

/// @title SponsoringPaymaster
/// @notice Devnet-only ERC-4337 (EntryPoint v0.8) paymaster that sponsors EVERY user operation
///         from its deposit at the EntryPoint. Never deploy it anywhere real: anyone could drain
///         the deposit. Production uses a verifying paymaster instead (the VerifyingPaymaster
///         pattern: the service signs each sponsored operation and the paymaster checks that
///         signature, validity window included, in _validatePaymasterUserOp).
contract SponsoringPaymaster is BasePaymaster {
    constructor(IEntryPoint entryPoint_) BasePaymaster(entryPoint_) {}

    /// Accepts every operation: empty context (so no postOp call) and validationData 0
    /// (valid signature, no time range).
    function _validatePaymasterUserOp(PackedUserOperation calldata, bytes32, uint256)
        internal
        pure
        override
        returns (bytes memory context, uint256 validationData)
    {
        return ("", 0);
    }
}
