"""Hub: one asyncio process that puts an LLM agent on Discord, Telegram and X."""
