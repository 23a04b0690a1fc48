/**
 * Migration 4, "condition_helpers".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical (tests/fixtures/migrations_v17.json); a change is a new migration.
 *
 * @module
 */

/** Version 4 of the schema. */
export const conditionHelpers = {
  version: 4,
  name: "condition_helpers",
  sql: `
      -- Helpers of the condition compiler (lib/engine/conditions.ts). All immutable: they depend
      -- on their arguments only, never on the session's TimeZone or DateStyle.
      --
      -- cdp_try_timestamptz: an ISO 8601 date-time (date, optional time with minutes, seconds
      -- and a fraction, optional offset; none means UTC) as timestamptz; null for anything else,
      -- impossible dates included, without raising.
      create function cdp_try_timestamptz(value text) returns timestamptz
      language plpgsql immutable strict parallel safe as $fn$
      declare
        m text[];
        y integer;
        mo integer;
        d integer;
        h integer;
        mi integer;
        s integer;
        micros integer;
        ts timestamp;
      begin
        if length(value) > 40 then
          return null;
        end if;
        m := regexp_match(value, '^([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[Tt ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:[.]([0-9]{1,9}))?)?([Zz]|([+-])([0-9]{2})(?::?([0-9]{2}))?)?)?$');
        if m is null then
          return null;
        end if;
        y := m[1]::integer;
        mo := m[2]::integer;
        d := m[3]::integer;
        h := coalesce(m[4]::integer, 0);
        mi := coalesce(m[5]::integer, 0);
        s := coalesce(m[6]::integer, 0);
        micros := coalesce(rpad(left(m[7], 6), 6, '0')::integer, 0);
        if y < 1 or mo < 1 or mo > 12 or d < 1 or h > 23 or mi > 59 or s > 59
           or d > extract(day from make_date(y, mo, 1) + interval '1 month - 1 day') then
          return null;
        end if;
        ts := make_timestamp(y, mo, d, h, mi, 0) + (s * 1000000 + micros) * interval '1 microsecond';
        if m[9] is not null then
          if m[10]::integer > 23 or coalesce(m[11]::integer, 0) > 59 then
            return null;
          end if;
          ts := ts - (case m[9] when '-' then -1 else 1 end)
            * (m[10]::integer * interval '1 hour' + coalesce(m[11]::integer, 0) * interval '1 minute');
        end if;
        return ts at time zone 'UTC';
      end
      $fn$;

      -- cdp_elements: the scalar values of a jsonb value (string, number, boolean): the elements
      -- of an array, else the value itself; nothing for SQL NULL, JSON null, objects.
      create function cdp_elements(value jsonb) returns setof jsonb
      language sql immutable parallel safe as $fn$
        select x from jsonb_array_elements(
          case jsonb_typeof(value) when 'array' then value else jsonb_build_array(value) end
        ) as t(x)
        where jsonb_typeof(x) in ('string', 'number', 'boolean')
      $fn$;

      -- cdp_jsonb_numeric: a JSON number as numeric, null for anything else (never a cast error).
      create function cdp_jsonb_numeric(value jsonb) returns numeric
      language sql immutable parallel safe as $fn$
        select case when jsonb_typeof(value) = 'number' then value::numeric end
      $fn$;

      -- cdp_jsonb_exists: Elasticsearch's exists: present, not JSON null, and an array only with
      -- a non-null element.
      create function cdp_jsonb_exists(value jsonb) returns boolean
      language sql immutable parallel safe as $fn$
        select case jsonb_typeof(value)
          when 'array' then exists (
            select 1 from jsonb_array_elements(value) as t(x) where jsonb_typeof(x) <> 'null')
          when 'null' then false
          else value is not null
        end
      $fn$;
    `,
};
