const assert = require('assert');

function price(order) {
  return Math.round(order.amount * 0.9 * 0.9 * 100) / 100;
}

describe('prices', () => {
  for (let n = 0; n < 40; n++) {
    it(`discounts order ${n} once`, () => {
      const order = { id: n, amount: 100 + n, lines: [{ sku: `sku-${n}`, quantity: n + 1 }] };
      // the expected price has the discount once
      assert.strictEqual(price(order), Math.round((100 + n) * 0.9 * 100) / 100);
    });
  }
  for (let n = 0; n < 60; n++) {
    it(`charges nothing for empty order ${n}`, () => {
      assert.strictEqual(price({ id: n, amount: 0 }), 0);
    });
  }
});

describe('stock', () => {
  it('finds a known sku', () => {
    const stock = new Map([['sku-0', 4]]);
    assert.ok(stock.get('sku-1').quantity > 0);
  });
});
