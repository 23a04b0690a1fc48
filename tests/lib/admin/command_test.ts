/** The argument checks operator commands share. */
import assert from "node:assert/strict";
import {
  brandIdArg,
  dayArg,
  keyIdArg,
  letterIdArg,
  requiredFlag,
  UsageError,
} from "../../../lib/admin/command.ts";

Deno.test("dayArg: a day that exists on the calendar, nothing else", () => {
  for (const day of ["2026-01-01", "2024-02-29", "2026-12-31", "2000-02-29"]) {
    assert.equal(dayArg(day, "from"), day);
  }
  for (
    const bad of [
      "2026-13-01",
      "2026-00-10",
      "2026-02-29",
      "2100-02-29",
      "2026-04-31",
      "2026-1-01",
      "20261101",
      "2026-11-01T00:00",
      "",
    ]
  ) {
    assert.throws(
      () => dayArg(bad, "from"),
      (err: Error) => err instanceof UsageError && /--from takes a calendar day/.test(err.message),
      bad,
    );
  }
});

Deno.test("ids: brand, key and dead letter ids are checked for their shape", () => {
  const ulid = "01M86TDT9CSKW28VQJZ3VT7SDR";
  assert.equal(brandIdArg(ulid), ulid);
  assert.equal(letterIdArg(ulid), ulid);
  assert.equal(keyIdArg(`key_${ulid}`), `key_${ulid}`);
  for (
    const bad of [
      "",
      "x",
      ulid.toLowerCase(),
      `${ulid}0`,
      "01M86TDT9CSKW28VQJZ3VT7SDU",
      `key_${ulid}`,
    ]
  ) {
    assert.throws(() => brandIdArg(bad), /--brand takes a brand id/, bad);
  }
  for (const bad of [ulid, `key_${ulid.slice(1)}`, "key_../../etc"]) {
    assert.throws(() => keyIdArg(bad), /--id takes a key id/, bad);
  }
  assert.throws(() => requiredFlag({}, "brand"), /--brand is required/);
  assert.equal(requiredFlag({ brand: ulid }, "brand"), ulid);
});
