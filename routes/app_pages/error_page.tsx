/**
 * The dashboard's error page: the status and what to do, never another shop's data.
 *
 * @module
 */
import { Layout } from "./layout.tsx";
import type { PageContext } from "./page_context.ts";

/** Renders an error page; `page` keeps the navigation when the session itself is valid. */
export function ErrorPage(props: { status: number; message: string; page: PageContext | null }) {
  const hint = props.status === 401
    ? "Open the app again from the Shopify admin to start a new session."
    : "";
  return (
    <Layout title={`Error ${props.status}`} page={props.page} active={null}>
      <h1>Error {props.status}</h1>
      <div class="banner critical" data-error={props.status}>{props.message}</div>
      {hint && <p class="subdued">{hint}</p>}
    </Layout>
  );
}
