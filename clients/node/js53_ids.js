// js53 snowflake IDs from Node.js with node-postgres (pg): every ID of a js53 sequence is below
// 2^53, so it is an exact JavaScript number and survives JSON.parse in any browser.
//
// Usage: node clients/node/js53_ids.js [postgresql://URL]
// Without a URL pg reads libpq's environment variables (PGHOST, PGPORT, PGUSER, PGDATABASE).
// Expects: CREATE EXTENSION snowflake_id;
//          SELECT snowflake_create_sequence('web_ids', preset => 'js53');
//          CREATE TABLE posts (id bigint PRIMARY KEY DEFAULT snowflake_nextval('web_ids'),
//                              title text);
// Exits non-zero when a check fails. Run by pgrx-tests/tests/clients.rs.
'use strict';
const assert = require('node:assert/strict');
const { Client, types } = require('pg');

// Parse every bigint as a Number. Safe ONLY when every bigint this process reads is a js53 ID
// (or otherwise below 2^53): it applies to all queries of all clients, and silently rounds a
// classic ID (see classic_ids.js).
types.setTypeParser(20, Number);

async function main() {
  const client = new Client({ connectionString: process.argv[2] });
  await client.connect();
  try {
    const { rows } = await client.query(
      "INSERT INTO posts (title) SELECT 'post ' || n FROM generate_series(1, 100) n " +
      'RETURNING id, id::text AS exact');
    for (const row of rows) {
      assert.equal(typeof row.id, 'number');
      assert.ok(Number.isSafeInteger(row.id), `${row.id} is not a safe integer`);
      assert.equal(String(row.id), row.exact, 'the number is the exact ID');
    }
    const id = rows[0].id;
    console.log(`js53 id as a number: ${id} (< 2^53 = ${2 ** 53})`);

    // A number round-trips through JSON and back into SQL.
    const fromJson = JSON.parse(JSON.stringify({ id })).id;
    const found = await client.query('SELECT title FROM posts WHERE id = $1', [fromJson]);
    assert.equal(found.rows.length, 1);
    assert.equal(found.rows[0].title, 'post 1');
    console.log(`JSON round trip: ${JSON.stringify({ id })} finds '${found.rows[0].title}'`);

    // Decode with the sequence's name: js53 has its own layout (10 ms ticks, 7 worker bits).
    const decoded = await client.query("SELECT (snowflake_decode($1, 'web_ids')).*", [id]);
    assert.ok(Math.abs(decoded.rows[0].ts - Date.now()) < 60_000, `${decoded.rows[0].ts}`);
    console.log(`decoded: ts=${decoded.rows[0].ts.toISOString()} worker=${decoded.rows[0].worker}`);

    // The whole sequence stays below 2^53 until it runs out.
    const last = await client.query(
      "SELECT snowflake_max_id(runs_out_at, 'web_ids') AS max_id, runs_out_at " +
      "FROM snowflake_sequences WHERE name = 'web_ids'");
    assert.ok(Number.isSafeInteger(last.rows[0].max_id), `${last.rows[0].max_id}`);
    console.log(`largest web_ids ID ever: ${last.rows[0].max_id} ` +
      `(runs out ${last.rows[0].runs_out_at.toISOString()})`);
  } finally {
    await client.end();
  }
  console.log('node js53 example: all checks passed');
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
