// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @title Wrapped Ether for the devnet (D16)
/// @notice The interface Uniswap v3's periphery expects of WETH9: `deposit` (also on plain ETH
///         received), `withdraw`, and an ERC-20 of 18 decimals. Written for the devnet on
///         OpenZeppelin's ERC20; never deployed anywhere else.
contract WETH9 is ERC20 {
    event Deposit(address indexed dst, uint256 wad);
    event Withdrawal(address indexed src, uint256 wad);

    constructor() ERC20("Wrapped Ether", "WETH") {}

    receive() external payable {
        deposit();
    }

    function deposit() public payable {
        _mint(msg.sender, msg.value);
        emit Deposit(msg.sender, msg.value);
    }

    /// @notice Burns `wad` and sends as much ETH to the caller (the router unwrapping for a swap).
    function withdraw(uint256 wad) external {
        _burn(msg.sender, wad);
        (bool sent,) = payable(msg.sender).call{value: wad}("");
        require(sent, "WETH9: ETH transfer failed");
        emit Withdrawal(msg.sender, wad);
    }
}
