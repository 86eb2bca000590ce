// Classic snowflake IDs from Node.js with node-postgres (pg): they are above 2^53, so they must
// stay strings (pg's default for bigint) or become BigInt, never Number.
//
// Usage: node clients/node/classic_ids.js [postgresql://URL]
// Without a URL pg reads libpq's environment variables (PGHOST, PGPORT, PGUSER, PGDATABASE);
// PGHOST may be a Unix socket directory.
// Expects: CREATE EXTENSION snowflake_id;
//          CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);
// Exits non-zero when a check fails. Run by pgrx-tests/tests/clients.rs.
'use strict';
const assert = require('node:assert/strict');
const { Client, types } = require('pg');

async function main() {
  const client = new Client({ connectionString: process.argv[2] });
  await client.connect();
  try {
    const { rows } = await client.query(
      "INSERT INTO orders (item) SELECT 'item ' || n FROM generate_series(1, 100) n RETURNING id");
    const id = rows[0].id;
    // pg returns bigint (int8, type oid 20) as a string by default: exact.
    assert.equal(typeof id, 'string');
    console.log(`id as pg returns it: '${id}' (string)`);

    // Number() cannot hold it: classic IDs are above Number.MAX_SAFE_INTEGER (2^53 - 1) ...
    assert.ok(BigInt(id) > BigInt(Number.MAX_SAFE_INTEGER));
    assert.equal(Number.isSafeInteger(Number(id)), false);
    // ... so most of them come out rounded to another ID (neighbouring IDs differ by 1).
    const rounded = rows.filter((row) => BigInt(Number(row.id)) !== BigInt(row.id));
    assert.ok(rounded.length > 0, 'expected Number() to round some of 100 classic IDs');
    const lossy = rounded[0].id;
    console.log(`Number('${lossy}') = ${Number(lossy)}: precision lost ` +
      `(${rounded.length} of ${rows.length} IDs changed)`);

    // Looked up by the rounded number, the row is not found: nothing, or another row whose ID
    // happens to be the rounded value. The string finds the row.
    const byNumber = await client.query('SELECT id FROM orders WHERE id = $1', [Number(lossy)]);
    const byString = await client.query('SELECT id FROM orders WHERE id = $1', [lossy]);
    assert.ok(byNumber.rows.every((row) => row.id !== lossy));
    assert.deepEqual(byString.rows, [{ id: lossy }]);
    console.log(`WHERE id = ${Number(lossy)} (the Number): ` +
      `${byNumber.rows.map((row) => `another row, ${row.id}`).join() || 'no row'}; ` +
      `WHERE id = '${lossy}' (the string): the row`);

    // Or BigInt, for arithmetic: here for one query (a per-query types override), or for the
    // whole process with types.setTypeParser(20, BigInt). Note JSON.stringify throws on BigInt.
    const bigintTypes = {
      getTypeParser: (oid, format) => (oid === 20 ? BigInt : types.getTypeParser(oid, format)),
    };
    const asBigInt = await client.query({
      text: 'SELECT id, id >> 22 AS ms_since_epoch FROM orders WHERE id = $1',
      values: [lossy],
      types: bigintTypes,
    });
    assert.equal(typeof asBigInt.rows[0].id, 'bigint');
    assert.equal(asBigInt.rows[0].id, BigInt(lossy));
    assert.equal(asBigInt.rows[0].ms_since_epoch, BigInt(lossy) >> 22n);
    console.log(`as BigInt: ${asBigInt.rows[0].id}n, ms since epoch ${asBigInt.rows[0].ms_since_epoch}n`);

    // Decoding in SQL works on the string as it is.
    const decoded = await client.query('SELECT (snowflake_decode($1)).*', [lossy]);
    assert.ok(Math.abs(decoded.rows[0].ts - Date.now()) < 60_000, `${decoded.rows[0].ts}`);
    console.log(`decoded: ts=${decoded.rows[0].ts.toISOString()} worker=${decoded.rows[0].worker}`);
  } finally {
    await client.end();
  }
  console.log('node classic example: all checks passed');
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
