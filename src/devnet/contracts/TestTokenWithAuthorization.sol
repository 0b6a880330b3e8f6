// SPDX-License-Identifier: MIT
pragma solidity ^0.8.26;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC3009} from "@openzeppelin/contracts/token/ERC20/extensions/draft-ERC3009.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";

/// @title TestTokenWithAuthorization
/// @notice TestToken (configurable decimals, open mint) with ERC-3009's transferWithAuthorization, as
///         USDC has it: what x402's `exact` scheme settles with. Its EIP-712 domain is its ERC-20 name
///         and version "2", as for Circle's FiatToken v2, so that name() and version() agree with the
///         domain an x402 client signs for (the facilitator compares them when a payment fails).
///         Devnet only: anyone can mint any amount to anyone.
/// @dev ERC20 is the first base with storage, so its balances mapping stays at slot 0 (tests credit
///      balances by writing it).
contract TestTokenWithAuthorization is ERC3009 {
    uint8 private immutable _decimals;

    constructor(string memory name_, string memory symbol_, uint8 decimals_)
        ERC20(name_, symbol_)
        EIP712(name_, "2")
    {
        _decimals = decimals_;
    }

    function decimals() public view override returns (uint8) {
        return _decimals;
    }

    /// @notice The EIP-712 domain's version, which FiatToken v2 exposes and x402's facilitator reads.
    function version() external pure returns (string memory) {
        return "2";
    }

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }
}
