// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title A receiver of plain ETH whose receiving code costs what it is told to (devnet only)
/// @notice What a payer could name as a refund's destination: a contract that refuses ETH
///         (`refusing`), or one that burns `burnGas` units of gas on every receipt of ETH
///         (type(uint256).max: all the gas it is given). Anyone may set both: tests change them
///         between the node's estimate and the block that includes a transfer.
contract CostlyReceiver {
    uint256 public burnGas;
    bool public refusing;

    constructor(uint256 burnGas_, bool refusing_) {
        burnGas = burnGas_;
        refusing = refusing_;
    }

    function set(uint256 burnGas_, bool refusing_) external {
        burnGas = burnGas_;
        refusing = refusing_;
    }

    receive() external payable {
        require(!refusing, "CostlyReceiver: refused");
        uint256 start = gasleft();
        // Runs out of gas once what it may burn exceeds what it was given.
        while (start - gasleft() < burnGas) {}
    }
}
