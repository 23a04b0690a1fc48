import assert from "node:assert/strict";
import { countToWindow, OFFSET_WINDOW } from "../../../lib/store/offset_window.ts";
import { freshDatabase } from "../../test_support.ts";

Deno.test("countToWindow: counts a short query exactly and a long one to the window + 1", async () => {
  const database = await freshDatabase();
  const sql = database.sql;
  try {
    assert.equal(await countToWindow(sql, sql`select n from generate_series(1, 7) as n`), 7);
    assert.equal(await countToWindow(sql, sql`select 1 where false`), 0);
    assert.equal(
      await countToWindow(sql, sql`select n from generate_series(1, ${OFFSET_WINDOW + 50}) as n`),
      OFFSET_WINDOW + 1,
    );
  } finally {
    await database.close();
  }
});
