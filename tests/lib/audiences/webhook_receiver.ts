/**
 * A real HTTP receiver for destination tests: records every POST, verifies its signature with
 * the snippet docs/audiences.md documents (loaded from the page itself), and answers what the
 * test says (`respond`: a status, or "hang" to never answer).
 *
 * @module
 */

/** A POST the receiver got. */
export interface Received {
  deliveryId: string;
  signature: string;
  body: string;
  json: {
    destination: string;
    test?: boolean;
    deliveries: {
      id: string;
      type: string;
      segment: { id: string; name: string };
      profile: { id: string; identity: Record<string, unknown> };
      at: string;
    }[];
  };
  /** Whether the documented snippet accepted the signature with the secret the test set. */
  verified: boolean;
  /** What the receiver answered. */
  answered: number | "hang";
  receivedAt: number;
}

/** A running receiver. */
export interface Receiver {
  url: string;
  received: Received[];
  /** The secret signatures are checked with. */
  secret: string;
  /** What the next POSTs get. */
  respond: number | "hang";
  /** The deliveries[] of the POSTs answered 2xx, in order. */
  accepted(): Received["json"]["deliveries"];
  close(): Promise<void>;
}

type Verify = (secret: string, body: string, header: string) => Promise<boolean>;

/** The verification snippet of docs/audiences.md#verifying-a-delivery, as a function. */
export async function documentedVerifier(): Promise<Verify> {
  const page = await Deno.readTextFile(new URL("../../../docs/audiences.md", import.meta.url));
  const section = page.slice(page.indexOf("### Verifying a delivery"));
  const code = section.match(/```js\n([\s\S]*?)```/)?.[1];
  if (!code) throw new Error("docs/audiences.md has no verification snippet");
  const module = await import(`data:application/javascript,${encodeURIComponent(code)}`);
  return module.verifyCdpSignature as Verify;
}

/** Starts a receiver on a free loopback port. */
export async function startReceiver(secret = ""): Promise<Receiver> {
  const verify = await documentedVerifier();
  const hanging = new Set<() => void>();
  const receiver: Receiver = {
    url: "",
    received: [],
    secret,
    respond: 200,
    accepted: () =>
      receiver.received.filter((r) => typeof r.answered === "number" && r.answered < 300)
        .flatMap((r) => r.json.deliveries),
    close: async () => {
      for (const release of hanging) release();
      await server.shutdown();
    },
  };
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const body = await req.text();
    const signature = req.headers.get("X-CDP-Signature") ?? "";
    const answered = receiver.respond;
    receiver.received.push({
      deliveryId: req.headers.get("X-CDP-Delivery-Id") ?? "",
      signature,
      body,
      json: JSON.parse(body),
      verified: await verify(receiver.secret, body, signature),
      answered,
      receivedAt: Date.now(),
    });
    if (answered === "hang") {
      await new Promise<void>((resolve) => hanging.add(resolve));
      return new Response("late", { status: 200 });
    }
    return new Response(answered < 300 ? "ok" : "no", { status: answered });
  });
  receiver.url = `http://127.0.0.1:${server.addr.port}/hook`;
  return receiver;
}
