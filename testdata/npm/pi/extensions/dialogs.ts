// A pi extension for surfaced's tests: the tool ask_user opens one of pi's
// extension dialogs (select, confirm, input, editor) and returns the answer
// to the model, and the command /ask opens one without a model run. Both go
// through pi's RPC extension UI protocol (extension_ui_request /
// extension_ui_response), which surfaced turns into ui-request frames.
import { Type } from "typebox";

async function ask(ctx: any, p: any, signal?: AbortSignal): Promise<unknown> {
	switch (p.method) {
		case "select":
			return ctx.ui.select(p.title, p.options ?? [], { signal });
		case "confirm":
			return ctx.ui.confirm(p.title, p.message ?? "", { signal });
		case "input":
			return ctx.ui.input(p.title, p.placeholder, { signal });
		case "editor":
			return ctx.ui.editor(p.title, p.prefill);
		default:
			throw new Error(`unknown dialog method ${p.method}`);
	}
}

export default function (pi: any) {
	pi.registerTool({
		name: "ask_user",
		label: "Ask the user",
		description: "Ask the user through a dialog (select, confirm, input or editor) and return the answer.",
		parameters: Type.Object({
			method: Type.String(),
			title: Type.String(),
			message: Type.Optional(Type.String()),
			placeholder: Type.Optional(Type.String()),
			prefill: Type.Optional(Type.String()),
			options: Type.Optional(Type.Array(Type.String())),
		}),
		async execute(_id: string, params: any, signal: AbortSignal, _onUpdate: unknown, ctx: any) {
			const answer = await ask(ctx, params, signal);
			return { content: [{ type: "text", text: `answer: ${JSON.stringify(answer ?? null)}` }], details: {} };
		},
	});

	// /ask <method> <title>: a dialog with no model run; the answer comes back as a notice.
	pi.registerCommand("ask", {
		description: "Open a dialog (select, confirm, input, editor) and report the answer",
		handler: async (args: string, ctx: any) => {
			const [method, ...rest] = args.trim().split(/\s+/);
			const title = rest.join(" ") || "Question";
			const answer = await ask(ctx, { method, title, options: ["red", "green"], prefill: "draft" });
			ctx.ui.notify(`answer: ${JSON.stringify(answer ?? null)}`, "info");
		},
	});

	// /later <text>: returns at once; a second later the extension sends <text>
	// as a user message, which starts a run nobody prompted.
	pi.registerCommand("later", {
		description: "Send a user message shortly, on the extension's own initiative",
		handler: async (args: string) => {
			setTimeout(() => pi.sendUserMessage(args.trim() || "later"), 1000);
		},
	});

	pi.on("session_start", async (_event: unknown, ctx: any) => {
		ctx.ui.setStatus("dialogs", "loaded");
	});
}
