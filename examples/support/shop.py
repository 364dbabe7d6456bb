"""The support example's actions: a shop's orders and prices.

The orders live in this module to keep the example short; a real shop's actions would call
its order system, as examples/weather/weather.py calls a weather API.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from hub import Extension, RunContext, action

ORDERS: dict[str, dict[str, str]] = {
    "A-1001": {"item": "kettle", "status": "delivered"},
    "A-1002": {"item": "toaster", "status": "shipped"},
}
PRICES = {"kettle": 39.0, "toaster": 25.0}
REFUNDS: list[str] = []


class OrderArgs(BaseModel):
    order_id: str = Field(pattern=r"^A-\d{4}$", description="The order number, e.g. A-1001.")


class Order(BaseModel):
    order_id: str
    item: str
    status: str


class QuoteArgs(BaseModel):
    item: Literal["kettle", "toaster"]
    quantity: int = Field(1, ge=1, le=1000)


class Quote(BaseModel):
    item: str
    quantity: int
    total: float


@action(name="lookupOrder", description="An order's item and delivery status.")
async def lookup_order(args: OrderArgs, ctx: RunContext) -> Order:
    if args.order_id not in ORDERS:
        raise ValueError(f"no order {args.order_id}")
    return Order(order_id=args.order_id, **ORDERS[args.order_id])


@action(name="refundOrder", description="Refund an order in full.", queue="refunds")
async def refund_order(args: OrderArgs, ctx: RunContext) -> dict[str, str]:
    # queue="refunds": two refunds never run at once, so an order cannot be refunded twice
    if args.order_id not in ORDERS:
        raise ValueError(f"no order {args.order_id}")
    if args.order_id in REFUNDS:
        raise ValueError(f"order {args.order_id} was already refunded")
    REFUNDS.append(args.order_id)
    return {"order_id": args.order_id, "refund": "issued"}


@action(name="quotePrice", description="The price of a quantity of one item, in euros.")
async def quote_price(args: QuoteArgs, ctx: RunContext) -> Quote:
    return Quote(item=args.item, quantity=args.quantity, total=PRICES[args.item] * args.quantity)


extension = Extension(name="shop", actions=[lookup_order, refund_order, quote_price])
