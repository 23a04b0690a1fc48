/**
 * Compilation of a parsed tree (tree.ts) to one boolean, parameterized SQL fragment over
 * `profiles p` or `events e`. Pure: no I/O, every value bound; it only walks the tree, which
 * parsing has already checked, resolved and anchored in time.
 *
 * @module
 */
import type { Sql } from "../../store/db.ts";
import { DATE_WINDOW_END, DAY, floorUnit, timestampText } from "./dates.ts";
import {
  type Column,
  columnSql,
  jsonRootSql,
  PREDICTION_COLUMNS,
  propertyExpression,
  type PropertySource,
  singleKey,
} from "./properties.ts";
import type { ConditionNode, PropertyTest, Scalar, ScalarList } from "./tree.ts";
import type { ItemType, SqlFragment } from "./vocabulary.ts";

/** Options of {@linkcode compileCondition}. */
export interface CompileOptions {
  itemType: ItemType;
  /** The scope the enclosing query filters on (`p.scope = scope` or `e.scope = scope`). */
  scope: string;
  /**
   * The enclosing query reads one known profile: event history is then probed per profile
   * through the profile index instead of resolved for the whole scope at once.
   */
  single?: boolean;
}

interface _Ctx {
  sql: Sql;
  scope: string;
  single: boolean;
}

/**
 * Compiles a parsed tree to a boolean SQL fragment over `p` (profiles) or `e` (events) of
 * `options.scope`. The fragment is never SQL NULL and is only meaningful under the enclosing
 * query's own scope filter. Returned synchronously: interpolate it
 * (`sql\`... where p.scope = ${scope} and ${fragment}\``), do not await it.
 */
export function compileCondition(
  sql: Sql,
  tree: ConditionNode,
  options: CompileOptions,
): SqlFragment {
  const ctx = { sql, scope: options.scope, single: options.single ?? false };
  return _compileNode(ctx, tree, options.itemType);
}

function _compileNode(c: _Ctx, node: ConditionNode, context: ItemType): SqlFragment {
  const { sql } = c;
  switch (node.type) {
    case "and":
    case "or": {
      const parts = node.subConditions.map((sub) => _compileNode(c, sub, context));
      return node.type === "and" ? _and(sql, parts) : _or(sql, parts);
    }
    case "not":
      return sql`(not ${_compileNode(c, node.subCondition, context)})`;
    case "matchAll":
      return sql`true`;
    case "eventType":
      return sql`(e.event_type = ${node.eventTypeId}::text)`;
    case "pastEvents":
      return _compilePastEvents(c, node);
    case "property": {
      const holds = node.negated
        ? sql`(not ${_compileTest(c, node.source, node.test)})`
        : _compileTest(c, node.source, node.test);
      if (!node.session) return holds;
      // An event's own session; for a profile, any of its sessions (a merge moves them over).
      return context === "event"
        ? sql`(exists (select 1 from sessions s
            where s.scope = ${c.scope} and s.item_id = e.session_id and ${holds}))`
        : sql`(exists (select 1 from sessions s
            where s.scope = ${c.scope} and s.profile_id = p.item_id and ${holds}))`;
    }
  }
}

function _and(sql: Sql, parts: SqlFragment[]): SqlFragment {
  return sql`(${parts.reduce((acc, part) => sql`${acc} and ${part}`)})`;
}

function _or(sql: Sql, parts: SqlFragment[]): SqlFragment {
  return sql`(${parts.reduce((acc, part) => sql`${acc} or ${part}`)})`;
}

/**
 * A pastEventCondition. Over a whole scope, the matching events are resolved once to their
 * (alias-resolved) profiles and joined (a hash semi- or anti-join); probing each profile's
 * history instead costs an index lookup per profile, which only pays for a single profile.
 */
function _compilePastEvents(
  c: _Ctx,
  node: Extract<ConditionNode, { type: "pastEvents" }>,
): SqlFragment {
  const { sql } = c;
  const where: SqlFragment[] = [sql`e.scope = ${c.scope}`];
  if (node.after !== undefined) where.push(sql`e.time_stamp > ${_timestamp(sql, node.after)}`);
  if (node.from !== undefined) where.push(sql`e.time_stamp >= ${_timestamp(sql, node.from)}`);
  if (node.until !== undefined) where.push(sql`e.time_stamp < ${_timestamp(sql, node.until)}`);
  where.push(_compileNode(c, node.eventCondition, "event"));
  const { min, max } = node;
  if (min === 0 && max === undefined) return sql`true`;
  return c.single
    ? _pastEventsOfOne(sql, _and(sql, where), min, max)
    : _pastEventsOfScope(sql, _and(sql, where), min, max);
}

function _pastEventsOfScope(
  sql: Sql,
  where: SqlFragment,
  min: number,
  max: number | undefined,
): SqlFragment {
  const matching = sql`
    select coalesce(a.profile_id, e.profile_id) as pid
    from events e left join profile_aliases a on a.scope = e.scope and a.alias_id = e.profile_id
    where ${where}`;
  // Zero events qualify: the profiles with more than the maximum are the ones excluded.
  if (min === 0) {
    const excluded = max === 0 ? matching : sql`${matching} group by 1 having count(*) > ${max!}`;
    return sql`(not exists (select 1 from (${excluded}) m where m.pid = p.item_id))`;
  }
  if (min === 1 && max === undefined) return sql`(p.item_id in (${matching}))`;
  return sql`(p.item_id in (${matching} group by 1 having count(*) >= ${min}${
    max === undefined ? sql`` : sql` and count(*) <= ${max}`
  }))`;
}

function _pastEventsOfOne(
  sql: Sql,
  where: SqlFragment,
  min: number,
  max: number | undefined,
): SqlFragment {
  const matching = sql`select 1 from events e where e.profile_id = any(array(
      select p.item_id
      union all
      select a.alias_id from profile_aliases a where a.scope = p.scope and a.profile_id = p.item_id))
    and ${where}`;
  // Counting stops one past the bound that decides: enough, however many events there are.
  const counted = (limit: number) => sql`(select count(*) from (${matching} limit ${limit}) as c)`;
  if (max === undefined) {
    return min === 1 ? sql`(exists (${matching}))` : sql`(${counted(min)} >= ${min})`;
  }
  if (max === 0) return sql`(not exists (${matching}))`;
  return sql`(${counted(max + 1)} between ${min} and ${max})`;
}

/**
 * An instant of the date window, or its end, as a timestamptz. The driver writes a timestamptz
 * parameter through JavaScript's Date, whose text for the window's end (the year 10000) has a
 * sign PostgreSQL refuses: that one instant goes as text, cast once per query.
 */
function _timestamp(sql: Sql, time: number): SqlFragment {
  return time === DATE_WINDOW_END
    ? _once(sql, sql`${timestampText(time)}::text::timestamptz`)
    : sql`${timestampText(time)}::timestamptz`;
}

type _CmpType = Scalar["type"];

const _NULLABLE_COLUMNS: ReadonlySet<Column> = new Set<Column>([
  "p.first_visit",
  "p.last_visit",
  ...PREDICTION_COLUMNS,
]);

/**
 * True when some value of the property satisfies `pred`: each scalar element of a jsonb array,
 * else the scalar itself, or the column; never NULL. Only arrays pay for the expansion: a
 * scalar (the common case) is compared in place.
 */
function _some(
  sql: Sql,
  source: PropertySource,
  type: _CmpType,
  pred: (scalar: SqlFragment) => SqlFragment,
  anyOf?: (elements: SqlFragment) => SqlFragment,
): SqlFragment {
  if (source.kind !== "json") {
    const column = columnSql(sql, source.column);
    return _NULLABLE_COLUMNS.has(source.column)
      ? sql`coalesce(${pred(column)}, false)`
      : pred(column);
  }
  const value = propertyExpression(sql, source);
  // With `anyOf`, an array is tested through its typed elements (value op ANY(...)): a function
  // call keeps the scan parallel safe, where a correlated subquery would not.
  const array = anyOf
    ? anyOf(
      type === "text"
        ? sql`cdp_texts(${value})`
        : type === "numeric"
        ? sql`cdp_numbers(${value})`
        : sql`cdp_timestamps(${value})`,
    )
    : sql`exists (select 1 from cdp_elements(${value}) as x(v) where ${
      pred(
        type === "text"
          ? sql`(x.v #>> '{}')`
          : type === "numeric"
          ? sql`cdp_jsonb_numeric(x.v)`
          : sql`cdp_try_timestamptz(x.v #>> '{}')`,
      )
    })`;
  // Each extra read of the path costs about as much as the comparison itself, so the scalar
  // branch reads it as few times as its type allows.
  if (type === "numeric") {
    return sql`(case jsonb_typeof(${value})
      when 'number' then coalesce(${pred(sql`(${value})::numeric`)}, false)
      when 'array' then ${array}
      else false end)`;
  }
  const scalar = type === "text"
    ? sql`(${value} #>> '{}')`
    : sql`cdp_try_timestamptz(${value} #>> '{}')`;
  // Objects and JSON null hold no scalar: their text form must not be compared.
  return sql`(case jsonb_typeof(${value})
    when 'array' then ${array}
    when 'object' then false
    when 'null' then false
    else coalesce(${pred(scalar)}, false) end)`;
}

/**
 * An expression of parameters only, computed once per query (an InitPlan). A repeated statement
 * runs a generic plan, where parameters are not constants: a cast or constructor over them would
 * otherwise be evaluated again for every row (a text-to-jsonb cast per row doubled a count).
 */
function _once(sql: Sql, expression: SqlFragment): SqlFragment {
  return sql`(select ${expression})`;
}

const _JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/**
 * `equals` with a text value on a jsonb property, the commonest segment test, in one read of the
 * path: a scalar matches when its text is the value (which, not starting with `[` or `{`, can be
 * no array's or object's text); an array, its text starting with `[`, is tested by containment
 * on the whole document (no copy of the property). Same answers as the general form.
 */
function _textEquals(
  sql: Sql,
  source: Extract<PropertySource, { kind: "json" }>,
  value: string,
): SqlFragment {
  const root = jsonRootSql(sql, source.root);
  // The JSON scalars whose text is `value`: a string, and a number or boolean spelled alike.
  const numeric = _JSON_NUMBER.test(value);
  const candidates = [JSON.stringify(value)];
  if (numeric) candidates.push(value);
  if (value === "true" || value === "false") candidates.push(value);
  const screens = candidates.map((candidate) => {
    const document = source.path.reduceRight(
      (inner, key) => `{${JSON.stringify(key)}:${inner}}`,
      `[${candidate}]`,
    );
    return sql`${root} @> ${_once(sql, sql`${document}::text::jsonb`)}`;
  });
  // Containment is exact for a string or a boolean element; a number's text may differ from the
  // value it equals (5.0 contains 5), so its elements' text is compared. That function call is
  // left out otherwise: the planner costs it on every row, which turned whole-brand scans into
  // bitmap scans (and past JIT's threshold) although it runs only on arrays.
  const property = propertyExpression(sql, source);
  const exact = numeric
    ? sql`and jsonb_typeof(${property}) = 'array' and ${value}::text = any(cdp_texts(${property}))`
    : sql``;
  const text = _propertyText(sql, source);
  // Only an array's text starts with `[` (a string that does fails the exact check after it):
  // the text read again is cheaper than the containment test on the whole document, which most
  // rows, holding another scalar, then skip.
  return sql`(case ${text} when ${value}::text then true
    else coalesce(${text} like '[%'
      and (${screens.reduce((acc, screen) => sql`${acc} or ${screen}`)}) ${exact}, false) end)`;
}

/** A jsonb property's text: `->>` for a single key (see singleKey), else `#>>`. */
function _propertyText(
  sql: Sql,
  source: Extract<PropertySource, { kind: "json" }>,
): SqlFragment {
  const root = jsonRootSql(sql, source.root);
  return singleKey(source.path)
    ? sql`(${root} ->> ${source.path[0]!}::text)`
    : sql`(${root} #>> ${source.path}::text[])`;
}

/** Elasticsearch's exists: present, not JSON null, and an array only with a non-null element. */
function _exists(sql: Sql, value: SqlFragment): SqlFragment {
  // Spelled out rather than cdp_jsonb_exists(): a function holding a subquery is not inlined,
  // and calling it per row cost several times the comparison. A simple CASE reads the property
  // once; every branch but the array's is a constant, and that one is parallel safe.
  return sql`(case jsonb_typeof(${value})
    when 'array' then jsonb_path_exists(${value}, '$[*] ? (@.type() != "null")')
    when 'string' then true
    when 'number' then true
    when 'boolean' then true
    when 'object' then true
    else false end)`;
}

type _Bound =
  | { type: "text"; value: SqlFragment }
  | { type: "numeric"; value: SqlFragment; n: number }
  | {
    type: "timestamptz";
    lo: SqlFragment;
    hi: SqlFragment;
    span: [number, number];
  };

function _bound(sql: Sql, value: Scalar): _Bound {
  switch (value.type) {
    case "text":
      return { type: "text", value: sql`${value.value}::text` };
    case "numeric":
      return { type: "numeric", value: sql`${String(value.value)}::numeric`, n: value.value };
    case "timestamptz":
      return {
        type: "timestamptz",
        lo: _timestamp(sql, value.lo),
        hi: _timestamp(sql, value.hi),
        span: [value.lo, value.hi],
      };
  }
}

/**
 * [from, to] as one range (a test then reads the property once, not twice): null for text,
 * which has no range type, and `false` when inverted (a range constructor would raise on it).
 */
function _range(sql: Sql, from: _Bound, to: _Bound): SqlFragment | false | null {
  if (from.type === "numeric" && to.type === "numeric") {
    return from.n > to.n ? false : _once(sql, sql`numrange(${from.value}, ${to.value}, '[]')`);
  }
  if (from.type === "timestamptz" && to.type === "timestamptz") {
    // A date stands for the span of its precision: from its start to the end of `to`'s span.
    return from.span[0] >= to.span[1]
      ? false
      : _once(sql, sql`tstzrange(${from.lo}, ${to.hi}, '[)')`);
  }
  return null;
}

/** A single-value comparison of `s` against a bound. */
function _compare(
  sql: Sql,
  s: SqlFragment,
  op: "eq" | "gt" | "gte" | "lt" | "lte",
  b: _Bound,
): SqlFragment {
  if (b.type === "timestamptz") {
    // A date stands for the span [lo, hi) of its precision, as in Elasticsearch ranges.
    switch (op) {
      case "eq":
        return sql`${_once(sql, sql`tstzrange(${b.lo}, ${b.hi}, '[)')`)} @> ${s}`;
      case "gt":
        return sql`${s} >= ${b.hi}`;
      case "gte":
        return sql`${s} >= ${b.lo}`;
      case "lt":
        return sql`${s} < ${b.lo}`;
      case "lte":
        return sql`${s} < ${b.hi}`;
    }
  }
  if (op === "eq") return sql`${s} = ${b.value}`;
  // Text orders by code point, the same on every server whatever its default collation.
  const left = b.type === "text" ? sql`(${s} collate "C")` : s;
  switch (op) {
    case "gt":
      return sql`${left} > ${b.value}`;
    case "gte":
      return sql`${left} >= ${b.value}`;
    case "lt":
      return sql`${left} < ${b.value}`;
    case "lte":
      return sql`${left} <= ${b.value}`;
  }
}

/** {@linkcode _compare} for some element of a typed array: `bound op ANY(elements)`. */
function _compareAny(
  sql: Sql,
  elements: SqlFragment,
  op: "eq" | "gt" | "gte" | "lt" | "lte",
  b: _Bound,
): SqlFragment {
  if (b.type === "timestamptz") {
    switch (op) {
      case "eq":
        return sql`${_once(sql, sql`tstzrange(${b.lo}, ${b.hi}, '[)')`)} @> any(${elements})`;
      case "gt":
        return sql`${b.hi} <= any(${elements})`;
      case "gte":
        return sql`${b.lo} <= any(${elements})`;
      case "lt":
        return sql`${b.lo} > any(${elements})`;
      case "lte":
        return sql`${b.hi} > any(${elements})`;
    }
  }
  const bound = b.type === "text" ? sql`(${b.value} collate "C")` : b.value;
  switch (op) {
    case "eq":
      return sql`${b.value} = any(${elements})`;
    case "gt":
      return sql`${bound} < any(${elements})`;
    case "gte":
      return sql`${bound} <= any(${elements})`;
    case "lt":
      return sql`${bound} > any(${elements})`;
    case "lte":
      return sql`${bound} >= any(${elements})`;
  }
}

/**
 * How a scalar matches one of a list of values (`match`), and the list as rows `w(v)` or
 * `w(lo, hi)` for the `all` operator (`from`).
 */
function _list(
  sql: Sql,
  list: ScalarList,
): {
  from: SqlFragment;
  match: (s: SqlFragment) => SqlFragment;
  any: (s: SqlFragment) => SqlFragment;
  /** Some element of a typed array is in the list (text and numbers only). */
  overlaps?: (elements: SqlFragment) => SqlFragment;
} {
  if (list.type !== "timestamptz") {
    const array = list.type === "text"
      ? sql`${list.values}::text[]`
      : sql`${list.values.map(String)}::numeric[]`;
    return {
      from: sql`unnest(${array}) as w(v)`,
      match: (s) => sql`${s} = w.v`,
      any: (s) => sql`${s} = any(${array})`,
      overlaps: (elements) => sql`${elements} && ${array}`,
    };
  }
  // As text (see _timestamp), cast once per query.
  const bounds = (which: 0 | 1) =>
    _once(sql, sql`${list.spans.map((span) => timestampText(span[which]))}::text[]::timestamptz[]`);
  const from = sql`unnest(${bounds(0)}, ${bounds(1)}) as w(lo, hi)`;
  const match = (s: SqlFragment) => sql`(${s} >= w.lo and ${s} < w.hi)`;
  return { from, match, any: (s) => sql`exists (select 1 from ${from} where ${match(s)})` };
}

/** A property test, positive (the node's `negated` is applied around it). */
function _compileTest(c: _Ctx, source: PropertySource, test: PropertyTest): SqlFragment {
  const { sql } = c;
  if (test.op === "exists") {
    return source.kind === "json"
      ? _exists(sql, propertyExpression(sql, source))
      : sql`(${columnSql(sql, source.column)} is not null)`;
  }
  switch (test.op) {
    case "eq":
    case "gt":
    case "gte":
    case "lt":
    case "lte": {
      const { op, value } = test;
      if (
        op === "eq" && source.kind === "json" && value.type === "text" &&
        !/^[[{]/.test(value.value)
      ) {
        return _textEquals(sql, source, value.value);
      }
      const b = _bound(sql, value);
      return _some(
        sql,
        source,
        value.type,
        (s) => _compare(sql, s, op, b),
        (elements) => _compareAny(sql, elements, op, b),
      );
    }
    case "between": {
      const from = _bound(sql, test.from);
      const to = _bound(sql, test.to);
      const type = test.from.type;
      const range = _range(sql, from, to);
      if (range === false) return sql`false`;
      if (range === null) {
        return _some(
          sql,
          source,
          type,
          (s) => sql`(${_compare(sql, s, "gte", from)} and ${_compare(sql, s, "lte", to)})`,
        );
      }
      return _some(
        sql,
        source,
        type,
        // An integer column needs numeric to meet numrange.
        (s) => sql`${range} @> ${type === "numeric" ? sql`(${s})::numeric` : s}`,
        (elements) => sql`${range} @> any(${elements})`,
      );
    }
    case "contains":
      return _some(sql, source, "text", (s) => sql`strpos(${s}, ${test.value}::text) > 0`);
    case "startsWith":
      return _some(sql, source, "text", (s) => sql`starts_with(${s}, ${test.value}::text)`);
    case "endsWith":
      return _some(
        sql,
        source,
        "text",
        (s) => sql`right(${s}, length(${test.value}::text)) = ${test.value}::text`,
      );
    case "matchesRegex":
      // Anchored like Lucene's regexp query: the whole value must match.
      return _some(
        sql,
        source,
        "text",
        (s) => sql`${s} ~ ${_once(sql, sql`'^(?:' || ${test.value}::text || ')$'`)}`,
      );
    case "in": {
      const list = _list(sql, test.values);
      return _some(sql, source, test.values.type, list.any, list.overlaps);
    }
    case "all": {
      const list = _list(sql, test.values);
      return sql`(not exists (select 1 from ${list.from} where not ${
        _some(sql, source, test.values.type, list.match)
      }))`;
    }
    case "inContains":
      return _some(
        sql,
        source,
        "text",
        (s) =>
          sql`exists (select 1 from unnest(${test.values}::text[]) as w(v) where strpos(${s}, w.v) > 0)`,
      );
    case "isDay": {
      const start = floorUnit(test.value.lo, "d");
      const day = _once(
        sql,
        sql`tstzrange(${_timestamp(sql, start)}, ${_timestamp(sql, start + DAY)}, '[)')`,
      );
      return _some(
        sql,
        source,
        "timestamptz",
        (s) => sql`${day} @> ${s}`,
        (elements) => sql`${day} @> any(${elements})`,
      );
    }
  }
}
