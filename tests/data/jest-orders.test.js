function price(order) {
  return Math.round(order.amount * 0.9 * 0.9 * 100) / 100;
}

describe('prices', () => {
  for (let n = 0; n < 40; n++) {
    test(`order ${n} is discounted once`, () => {
      const order = { id: n, amount: 100 + n, lines: [{ sku: `sku-${n}`, quantity: n + 1 }] };
      // the expected price has the discount once
      expect(price(order)).toBe(Math.round((100 + n) * 0.9 * 100) / 100);
    });
  }
  for (let n = 0; n < 60; n++) {
    test(`an empty order ${n} costs nothing`, () => {
      expect(price({ id: n, amount: 0 })).toBe(0);
    });
  }
});

describe('stock', () => {
  test('lookup of a known sku', () => {
    const stock = new Map([['sku-0', 4]]);
    expect(stock.get('sku-1').quantity).toBeGreaterThan(0);
  });
});
