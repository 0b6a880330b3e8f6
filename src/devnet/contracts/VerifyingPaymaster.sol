// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {BasePaymaster} from "@account-abstraction/contracts/core/BasePaymaster.sol";
import "@account-abstraction/contracts/core/Helpers.sol";
import {IEntryPoint} from "@account-abstraction/contracts/interfaces/IEntryPoint.sol";
import {PackedUserOperation} from "@account-abstraction/contracts/interfaces/PackedUserOperation.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {MessageHashUtils} from "@openzeppelin/contracts/utils/cryptography/MessageHashUtils.sol";

/// @title VerifyingPaymaster
/// @notice ERC-4337 (EntryPoint v0.8) paymaster that pays only for the user operations its
///         off-chain signer signed, as a production paymaster service's does (the pattern of the
///         eth-infinitism sample, written for v0.8). The devnet's ERC-7677 endpoint
///         (src/devnet/paymaster-service.ts) holds the signer's key.
///
///         paymasterAndData = paymaster (20 bytes) | paymasterVerificationGasLimit (16)
///                          | paymasterPostOpGasLimit (16) | validUntil (6) | validAfter (6)
///                          | signature (65)
///
///         The signature covers every field of the operation but the account's signature and
///         itself: every gas limit (the paymaster's own two included), the fees, the nonce, the
///         calls, plus the chain, this paymaster and the validity window. An operation whose
///         limits change after the signer signed fails validation (AA34).
contract VerifyingPaymaster is BasePaymaster {
    address public immutable verifyingSigner;

    uint256 private constant VALID_UNTIL_OFFSET = PAYMASTER_DATA_OFFSET;
    uint256 private constant VALID_AFTER_OFFSET = VALID_UNTIL_OFFSET + 6;
    uint256 private constant SIGNATURE_OFFSET = VALID_AFTER_OFFSET + 6;

    constructor(IEntryPoint entryPoint_, address verifyingSigner_) BasePaymaster(entryPoint_) {
        verifyingSigner = verifyingSigner_;
    }

    /// The hash the signer signs (as an EIP-191 personal message) and this contract checks.
    /// Not the operation's own hash: that one covers paymasterAndData, which holds the signature.
    function getHash(PackedUserOperation calldata userOp, uint48 validUntil, uint48 validAfter)
        public
        view
        returns (bytes32)
    {
        return keccak256(
            abi.encode(
                userOp.sender,
                userOp.nonce,
                keccak256(userOp.initCode),
                keccak256(userOp.callData),
                userOp.accountGasLimits,
                // The paymaster's verification and post-op gas limits, as packed in paymasterAndData.
                bytes32(userOp.paymasterAndData[PAYMASTER_VALIDATION_GAS_OFFSET:PAYMASTER_DATA_OFFSET]),
                userOp.preVerificationGas,
                userOp.gasFees,
                block.chainid,
                address(this),
                validUntil,
                validAfter
            )
        );
    }

    function parsePaymasterAndData(bytes calldata paymasterAndData)
        public
        pure
        returns (uint48 validUntil, uint48 validAfter, bytes calldata signature)
    {
        validUntil = uint48(bytes6(paymasterAndData[VALID_UNTIL_OFFSET:VALID_AFTER_OFFSET]));
        validAfter = uint48(bytes6(paymasterAndData[VALID_AFTER_OFFSET:SIGNATURE_OFFSET]));
        signature = paymasterAndData[SIGNATURE_OFFSET:];
    }

    /// A wrong or malformed signature fails validation (SIG_VALIDATION_FAILED) rather than reverting,
    /// so that a gas estimate made with an ERC-7677 stub runs the same code as the real operation.
    /// The validity window goes to the EntryPoint, which enforces it.
    function _validatePaymasterUserOp(PackedUserOperation calldata userOp, bytes32, uint256)
        internal
        view
        override
        returns (bytes memory context, uint256 validationData)
    {
        (uint48 validUntil, uint48 validAfter, bytes calldata signature) =
            parsePaymasterAndData(userOp.paymasterAndData);
        bytes32 hash = MessageHashUtils.toEthSignedMessageHash(getHash(userOp, validUntil, validAfter));
        (address recovered, ECDSA.RecoverError error,) = ECDSA.tryRecoverCalldata(hash, signature);
        bool failed = error != ECDSA.RecoverError.NoError || recovered != verifyingSigner;
        return ("", _packValidationData(failed, validUntil, validAfter));
    }
}
