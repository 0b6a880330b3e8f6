// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";

/// @notice The part of Permit2's ISignatureTransfer the proxy calls (src/devnet/contracts/Permit2.sol).
interface ISignatureTransfer {
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

    function permitWitnessTransferFrom(
        PermitTransferFrom memory permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes32 witness,
        string calldata witnessTypeString,
        bytes calldata signature
    ) external;
}

/// @title x402UptoPermit2Proxy (devnet)
/// @notice x402's `upto` Permit2 proxy (github.com/coinbase/x402, contracts/evm), with the ABI that
///         x402's npm package calls it by: the payer signs a Permit2 transfer of up to an amount with
///         this proxy as spender and a witness {to, facilitator, validAfter}; only that facilitator
///         may settle, any amount up to the permitted one, and only to `to`. The devnet puts its
///         runtime code at 0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002 with hardhat_setCode.
/// @dev Permit2's address is a constant here, where the real proxy takes it as a constructor argument
///      kept in an immutable: code placed with hardhat_setCode never ran a constructor. The reentrancy
///      guard's slot starts at zero rather than "not entered", which OpenZeppelin's guard treats alike.
contract x402UptoPermit2Proxy is ReentrancyGuard {
    /// @notice Permit2 at its canonical address.
    ISignatureTransfer public constant PERMIT2 = ISignatureTransfer(0x000000000022D473030F116dDEE9F6B43aC78BA3);

    /// @notice Completes Permit2's PermitWitnessTransferFrom type: the witness field, then the referenced
    ///         types in EIP-712's alphabetical order, as viem encodes x402's uptoPermit2WitnessTypes.
    string public constant WITNESS_TYPE_STRING =
        "Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,address facilitator,uint256 validAfter)";

    bytes32 public constant WITNESS_TYPEHASH = keccak256("Witness(address to,address facilitator,uint256 validAfter)");

    struct Witness {
        address to;
        address facilitator;
        uint256 validAfter;
    }

    struct EIP2612Permit {
        uint256 value;
        uint256 deadline;
        bytes32 r;
        bytes32 s;
        uint8 v;
    }

    event Settled();
    event SettledWithPermit();
    // A failed EIP-2612 permit does not stop settleWithPermit (Permit2 may be approved already); these
    // say why it failed.
    event EIP2612PermitFailedWithReason(address indexed token, address indexed owner, string reason);
    event EIP2612PermitFailedWithPanic(address indexed token, address indexed owner, uint256 errorCode);
    event EIP2612PermitFailedWithData(address indexed token, address indexed owner, bytes data);

    error AmountExceedsPermitted();
    error UnauthorizedFacilitator();
    error InvalidDestination();
    error InvalidOwner();
    /// @notice Kept for the ABI: the real proxy throws it for a zero Permit2 address in its constructor.
    error InvalidPermit2Address();
    error PaymentTooEarly();
    error Permit2612AmountMismatch();
    /// @notice A zero settlement (x402's facilitator settles zero without a transaction).
    error InvalidAmount();

    /// @notice Moves `amount` (at most the permitted amount) from `owner` to `witness.to`; the caller
    ///         must be `witness.facilitator`.
    function settle(
        ISignatureTransfer.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        _checkCaller(permit, amount, witness);
        _settle(permit, amount, owner, witness, signature);
        emit Settled();
    }

    /// @notice As settle, after submitting the payer's EIP-2612 permit that approves Permit2 for the
    ///         permitted amount (gas sponsoring); settles even if that permit fails.
    function settleWithPermit(
        EIP2612Permit calldata permit2612,
        ISignatureTransfer.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        _checkCaller(permit, amount, witness);
        if (permit2612.value != permit.permitted.amount) revert Permit2612AmountMismatch();
        _tryPermit(permit.permitted.token, owner, permit2612);
        _settle(permit, amount, owner, witness, signature);
        emit SettledWithPermit();
    }

    function _checkCaller(
        ISignatureTransfer.PermitTransferFrom calldata permit,
        uint256 amount,
        Witness calldata witness
    ) private view {
        if (amount > permit.permitted.amount) revert AmountExceedsPermitted();
        if (msg.sender != witness.facilitator) revert UnauthorizedFacilitator();
    }

    function _settle(
        ISignatureTransfer.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) private {
        if (amount == 0) revert InvalidAmount();
        if (owner == address(0)) revert InvalidOwner();
        if (witness.to == address(0)) revert InvalidDestination();
        if (block.timestamp < witness.validAfter) revert PaymentTooEarly();
        // The witness hash binds recipient, facilitator and start: Permit2 checks it against the signature.
        bytes32 witnessHash =
            keccak256(abi.encode(WITNESS_TYPEHASH, witness.to, witness.facilitator, witness.validAfter));
        PERMIT2.permitWitnessTransferFrom(
            permit,
            ISignatureTransfer.SignatureTransferDetails({to: witness.to, requestedAmount: amount}),
            owner,
            witnessHash,
            WITNESS_TYPE_STRING,
            signature
        );
    }

    function _tryPermit(address token, address owner, EIP2612Permit calldata p) private {
        try IERC20Permit(token).permit(owner, address(PERMIT2), p.value, p.deadline, p.v, p.r, p.s) {}
        catch Error(string memory reason) {
            emit EIP2612PermitFailedWithReason(token, owner, reason);
        } catch Panic(uint256 errorCode) {
            emit EIP2612PermitFailedWithPanic(token, owner, errorCode);
        } catch (bytes memory data) {
            emit EIP2612PermitFailedWithData(token, owner, data);
        }
    }
}
