// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";

/// @title Permit2 (devnet)
/// @notice The SignatureTransfer half of Uniswap's Permit2 (github.com/Uniswap/permit2), with its ABI,
///         EIP-712 hashing, unordered nonces and errors: what x402's `upto` (and `exact` Permit2) proxies
///         call. The devnet puts its runtime code at Permit2's canonical address,
///         0x000000000022D473030F116dDEE9F6B43aC78BA3, with hardhat_setCode. Not here: the
///         AllowanceTransfer half (approve/permit/transferFrom with allowances kept in Permit2), which
///         x402 never calls.
/// @dev No immutables: runtime code placed with hardhat_setCode never ran a constructor, so the domain
///      separator is built from block.chainid and address(this) on every call.
contract Permit2 {
    using SafeERC20 for IERC20;

    struct TokenPermissions {
        address token;
        uint256 amount;
    }

    struct PermitTransferFrom {
        TokenPermissions permitted;
        uint256 nonce;
        uint256 deadline;
    }

    struct SignatureTransferDetails {
        address to;
        uint256 requestedAmount;
    }

    struct PermitBatchTransferFrom {
        TokenPermissions[] permitted;
        uint256 nonce;
        uint256 deadline;
    }

    /// @notice Owner => word position => bitmap of used nonces (a nonce is word << 8 | bit).
    mapping(address => mapping(uint256 => uint256)) public nonceBitmap;

    event UnorderedNonceInvalidation(address indexed owner, uint256 word, uint256 mask);

    // Permit2 declares these at file level (SignatureExpired, InvalidNonce) or in its interfaces;
    // the selectors are the same wherever they are declared.
    error SignatureExpired(uint256 signatureDeadline);
    error InvalidNonce();
    error InvalidAmount(uint256 maxAmount);
    error LengthMismatch();
    error InvalidSignatureLength();
    error InvalidSignature();
    error InvalidSigner();
    error InvalidContractSignature();

    // Note: no "version" in Permit2's domain.
    bytes32 private constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,uint256 chainId,address verifyingContract)");
    bytes32 private constant NAME_HASH = keccak256("Permit2");
    bytes32 private constant TOKEN_PERMISSIONS_TYPEHASH = keccak256("TokenPermissions(address token,uint256 amount)");
    bytes32 private constant PERMIT_TRANSFER_FROM_TYPEHASH = keccak256(
        "PermitTransferFrom(TokenPermissions permitted,address spender,uint256 nonce,uint256 deadline)"
        "TokenPermissions(address token,uint256 amount)"
    );
    bytes32 private constant PERMIT_BATCH_TRANSFER_FROM_TYPEHASH = keccak256(
        "PermitBatchTransferFrom(TokenPermissions[] permitted,address spender,uint256 nonce,uint256 deadline)"
        "TokenPermissions(address token,uint256 amount)"
    );
    // The caller's witness type string completes these (its struct name, the field, the referenced types).
    string private constant WITNESS_STUB =
        "PermitWitnessTransferFrom(TokenPermissions permitted,address spender,uint256 nonce,uint256 deadline,";
    string private constant BATCH_WITNESS_STUB =
        "PermitBatchWitnessTransferFrom(TokenPermissions[] permitted,address spender,uint256 nonce,uint256 deadline,";

    /// @notice EIP-712 domain: name "Permit2", this chain, this address.
    function DOMAIN_SEPARATOR() public view returns (bytes32) {
        return keccak256(abi.encode(DOMAIN_TYPEHASH, NAME_HASH, block.chainid, address(this)));
    }

    function permitTransferFrom(
        PermitTransferFrom memory permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes calldata signature
    ) external {
        bytes32 structHash = keccak256(
            abi.encode(
                PERMIT_TRANSFER_FROM_TYPEHASH, _hashPermissions(permit.permitted), msg.sender, permit.nonce, permit.deadline
            )
        );
        _transfer(permit, transferDetails, owner, structHash, signature);
    }

    /// @notice As permitTransferFrom, with the caller's witness (hash and type string) in the signed struct.
    function permitWitnessTransferFrom(
        PermitTransferFrom memory permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes32 witness,
        string calldata witnessTypeString,
        bytes calldata signature
    ) external {
        bytes32 typeHash = keccak256(abi.encodePacked(WITNESS_STUB, witnessTypeString));
        bytes32 structHash = keccak256(
            abi.encode(typeHash, _hashPermissions(permit.permitted), msg.sender, permit.nonce, permit.deadline, witness)
        );
        _transfer(permit, transferDetails, owner, structHash, signature);
    }

    function permitTransferFrom(
        PermitBatchTransferFrom memory permit,
        SignatureTransferDetails[] calldata transferDetails,
        address owner,
        bytes calldata signature
    ) external {
        bytes32 structHash = keccak256(
            abi.encode(
                PERMIT_BATCH_TRANSFER_FROM_TYPEHASH, _hashAllPermissions(permit.permitted), msg.sender, permit.nonce,
                permit.deadline
            )
        );
        _transferBatch(permit, transferDetails, owner, structHash, signature);
    }

    function permitWitnessTransferFrom(
        PermitBatchTransferFrom memory permit,
        SignatureTransferDetails[] calldata transferDetails,
        address owner,
        bytes32 witness,
        string calldata witnessTypeString,
        bytes calldata signature
    ) external {
        bytes32 typeHash = keccak256(abi.encodePacked(BATCH_WITNESS_STUB, witnessTypeString));
        bytes32 structHash = keccak256(
            abi.encode(
                typeHash, _hashAllPermissions(permit.permitted), msg.sender, permit.nonce, permit.deadline, witness
            )
        );
        _transferBatch(permit, transferDetails, owner, structHash, signature);
    }

    /// @notice Marks the caller's nonces in word `wordPos` given by `mask` as used.
    function invalidateUnorderedNonces(uint256 wordPos, uint256 mask) external {
        nonceBitmap[msg.sender][wordPos] |= mask;
        emit UnorderedNonceInvalidation(msg.sender, wordPos, mask);
    }

    // Permit2's order: deadline, amount, nonce, signature, then the token transfer.
    function _transfer(
        PermitTransferFrom memory permit,
        SignatureTransferDetails calldata details,
        address owner,
        bytes32 structHash,
        bytes calldata signature
    ) private {
        if (block.timestamp > permit.deadline) revert SignatureExpired(permit.deadline);
        if (details.requestedAmount > permit.permitted.amount) revert InvalidAmount(permit.permitted.amount);
        _useUnorderedNonce(owner, permit.nonce);
        _verify(signature, _hashTypedData(structHash), owner);
        IERC20(permit.permitted.token).safeTransferFrom(owner, details.to, details.requestedAmount);
    }

    function _transferBatch(
        PermitBatchTransferFrom memory permit,
        SignatureTransferDetails[] calldata details,
        address owner,
        bytes32 structHash,
        bytes calldata signature
    ) private {
        if (block.timestamp > permit.deadline) revert SignatureExpired(permit.deadline);
        if (permit.permitted.length != details.length) revert LengthMismatch();
        _useUnorderedNonce(owner, permit.nonce);
        _verify(signature, _hashTypedData(structHash), owner);
        for (uint256 i = 0; i < details.length; ++i) {
            TokenPermissions memory permitted = permit.permitted[i];
            uint256 requested = details[i].requestedAmount;
            if (requested > permitted.amount) revert InvalidAmount(permitted.amount);
            // A zero request skips that token, as Permit2 lets the spender pick among the permitted ones.
            if (requested != 0) IERC20(permitted.token).safeTransferFrom(owner, details[i].to, requested);
        }
    }

    function _useUnorderedNonce(address owner, uint256 nonce) private {
        uint256 wordPos = nonce >> 8;
        uint256 bit = 1 << (nonce & 0xff);
        uint256 flipped = nonceBitmap[owner][wordPos] ^= bit;
        if (flipped & bit == 0) revert InvalidNonce();
    }

    function _hashTypedData(bytes32 structHash) private view returns (bytes32) {
        return keccak256(abi.encodePacked("\x19\x01", DOMAIN_SEPARATOR(), structHash));
    }

    function _hashPermissions(TokenPermissions memory permitted) private pure returns (bytes32) {
        return keccak256(abi.encode(TOKEN_PERMISSIONS_TYPEHASH, permitted.token, permitted.amount));
    }

    function _hashAllPermissions(TokenPermissions[] memory permitted) private pure returns (bytes32) {
        bytes32[] memory hashes = new bytes32[](permitted.length);
        for (uint256 i = 0; i < permitted.length; ++i) {
            hashes[i] = _hashPermissions(permitted[i]);
        }
        return keccak256(abi.encodePacked(hashes));
    }

    /// @dev Permit2's own rules rather than OpenZeppelin's ECDSA: 65- or 64-byte (EIP-2098) signatures
    ///      through plain ecrecover (no low-s rule), ERC-1271 for an owner with code, and its errors.
    function _verify(bytes calldata signature, bytes32 digest, address owner) private view {
        if (owner.code.length > 0) {
            if (IERC1271(owner).isValidSignature(digest, signature) != IERC1271.isValidSignature.selector) {
                revert InvalidContractSignature();
            }
            return;
        }
        bytes32 r;
        bytes32 s;
        uint8 v;
        if (signature.length == 65) {
            (r, s) = abi.decode(signature, (bytes32, bytes32));
            v = uint8(signature[64]);
        } else if (signature.length == 64) {
            bytes32 vs;
            (r, vs) = abi.decode(signature, (bytes32, bytes32));
            s = vs & bytes32(uint256(type(uint256).max >> 1));
            v = uint8(uint256(vs >> 255)) + 27;
        } else {
            revert InvalidSignatureLength();
        }
        address signer = ecrecover(digest, v, r, s);
        if (signer == address(0)) revert InvalidSignature();
        if (signer != owner) revert InvalidSigner();
    }
}
