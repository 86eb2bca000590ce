// snowflake_id with Drizzle ORM on node-postgres (pg): primary keys that the database fills in
// from DEFAULT snowflake_nextval(), read back with RETURNING, kept exact as strings.
//
// Usage: node clients/node/drizzle_orders.js [postgresql://URL]
// Without a URL pg reads libpq's environment variables (PGHOST, PGPORT, PGUSER, PGDATABASE);
// PGHOST may be a Unix socket directory.
// Expects: the tables of clients/orm_tables.sql (orders, order_lines).
// Exits non-zero when a check fails. Run by pgrx-tests/tests/clients.rs.
'use strict';
const assert = require('node:assert/strict');
const { Client } = require('pg');
const { asc, eq, inArray, sql } = require('drizzle-orm');
const { drizzle } = require('drizzle-orm/node-postgres');
const { bigint, customType, pgTable, text } = require('drizzle-orm/pg-core');

// A bigint column whose values stay the exact strings pg returns. Drizzle's own bigint() has two
// modes, neither fit for IDs above 2^53: 'number' rounds them, 'bigint' makes BigInts, which
// JSON.stringify refuses.
const snowflakeId = customType({ dataType: () => 'bigint' });

const orders = pgTable('orders', {
  // The database fills it in: inserts send DEFAULT, .returning() reads the ID back. (.default()
  // is for drizzle-kit, which writes it into the migration's CREATE TABLE.)
  id: snowflakeId('id').primaryKey().default(sql`snowflake_nextval()`),
  customer: text('customer').notNull(),
});

const orderLines = pgTable('order_lines', {
  id: snowflakeId('id').primaryKey().default(sql`snowflake_nextval()`),
  orderId: snowflakeId('order_id').notNull().references(() => orders.id),
  item: text('item').notNull(),
});

async function main() {
  const client = new Client({ connectionString: process.argv[2] });
  await client.connect();
  const statements = [];
  const db = drizzle({ client, logger: { logQuery: (query) => statements.push(query) } });
  try {
    // One row: insert into "orders" ("id", "customer") values (default, $1) returning ...
    const [order] = await db.insert(orders).values({ customer: 'ada' }).returning();
    assert.equal(typeof order.id, 'string');

    // Many rows in one INSERT ... RETURNING, one ID each.
    const more = await db.insert(orders)
      .values([{ customer: 'bob' }, { customer: 'cy' }, { customer: 'dee' }])
      .returning({ id: orders.id, customer: orders.customer });

    // Children that reference the new rows.
    const [line] = await db.insert(orderLines)
      .values({ orderId: order.id, item: 'book' }).returning();
    const moreLines = await db.insert(orderLines)
      .values(more.map((o) => ({ orderId: o.id, item: 'pen' }))).returning();

    // JSON for an API response: the IDs are strings, so JSON.stringify and JSON.parse keep them.
    const lines = await db.select().from(orderLines).where(eq(orderLines.orderId, order.id));
    const body = JSON.stringify({ ...order, lines });

    // Look a row up by ID: the string a client sends back.
    const request = JSON.parse(body);
    const [found] = await db.select().from(orders).where(eq(orders.id, request.id));
    assert.deepEqual(found, order);

    // The trap: the same column declared with Drizzle's bigint({ mode: 'number' }) reads rounded
    // numbers, most of them another ID (or none).
    const orderIds = [order, ...more].map((o) => o.id);
    const ordersAsNumbers = pgTable('orders', { id: bigint('id', { mode: 'number' }) });
    const asNumbers = await db.select().from(ordersAsNumbers)
      .where(inArray(ordersAsNumbers.id, orderIds)).orderBy(asc(ordersAsNumbers.id));

    // Decode the IDs in SQL.
    const lineIds = [line, ...moreLines].map((l) => l.id);
    const createdAt = (table, ids) => db.select({
      id: table.id,
      ts: sql`snowflake_timestamp(${table.id})`.mapWith((value) => new Date(value)),
    }).from(table).where(inArray(table.id, ids));
    const decoded = [
      ...await createdAt(orders, orderIds),
      ...await createdAt(orderLines, lineIds),
    ];

    console.log(`order ${order.id} (${order.customer}), ` +
      `in bulk ${more.map((o) => o.id).join(', ')}`);
    console.log(`lines ${[line, ...moreLines].map((l) => `${l.id} -> ${l.orderId}`).join(', ')}`);
    console.log(`json: ${body}`);
    for (const statement of statements.slice(0, 2)) console.log(`  ${statement}`);
    console.log(`bigint({ mode: 'number' }) reads ${order.id} as ${asNumbers[0].id}`);

    // Checks.
    const inserts = statements.filter((s) => s.startsWith('insert'));
    assert.equal(inserts.length, 4, 'one INSERT per .insert()');
    assert.ok(inserts.every((s) => s.includes('values (default, ')), inserts.join('\n'));
    assert.ok(inserts.every((s) => /returning "id"/.test(s)), inserts.join('\n'));
    const allIds = [...orderIds, ...lineIds];
    assert.ok(allIds.every((id) => typeof id === 'string' && /^[0-9]+$/.test(id)), `${allIds}`);
    assert.equal(new Set(allIds).size, allIds.length, `duplicate IDs: ${allIds}`);
    const increasing = allIds.every((id, i) => i === 0 || BigInt(allIds[i - 1]) < BigInt(id));
    assert.ok(increasing, `IDs of one session must increase: ${allIds}`);
    assert.ok(allIds.every((id) => BigInt(id) > 2n ** 53n), 'classic IDs are above 2^53');
    assert.deepEqual(more.map((o) => o.customer), ['bob', 'cy', 'dee']);
    assert.deepEqual(moreLines.map((l) => l.orderId), more.map((o) => o.id));
    assert.deepEqual(request.lines, [line]);
    assert.equal(request.id, order.id);
    assert.deepEqual(decoded.map((row) => row.id).sort(), [...allIds].sort());
    for (const row of decoded) {
      assert.ok(Math.abs(row.ts - Date.now()) < 60_000, `${row.id} decodes to ${row.ts}`);
    }
    assert.equal(asNumbers.length, orderIds.length);
    assert.ok(asNumbers.every((row) => typeof row.id === 'number'));
    assert.ok(asNumbers.some((row, i) => String(row.id) !== orderIds[i]),
      'expected mode number to round some of the IDs');
  } finally {
    await client.end();
  }
  console.log('node drizzle example: all checks passed');
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
