import { expect, test } from 'vitest';

const MIRRORS = ['alder', 'aspen', 'beech', 'cherry', 'cypress', 'elm', 'fir', 'ginkgo', 'hawthorn', 'hemlock',
  'holly', 'hornbeam', 'larch', 'laurel', 'magnolia', 'mulberry', 'oak', 'palm', 'pear', 'plane',
  'poplar', 'redwood', 'rowan', 'sequoia', 'spruce', 'sumac', 'sycamore', 'tupelo', 'walnut', 'yew'];

// A client that logs each mirror that refused it while it tries the next, then succeeds.
test('fetches the catalogue from some mirror', () => {
  for (const mirror of MIRRORS) {
    console.error(new Error(`the ${mirror} mirror refused the connection`));
  }
  expect(true).toBe(true);
});
