package main

import (
	"encoding/json"
	"fmt"
)

// commandSchemas are the JSON Schemas of the canvas commands' args, by
// action; agent_ready declares them, the daemon refuses args that do not
// fit (invalid_args, before the agent sees them) and an MCP client sees
// them as the tools canvas_<action>. Each top-level description is the
// command's. The commands check their args too (ranges that depend on the
// image, such as a crop box inside it).
var commandSchemas = map[string]string{
	"register": object("Add an image artifact of the session to the gallery and put it on the stage.",
		`"attachmentId":{"type":"string","description":"the image's artifact id (att_…)"},
		"derivedFrom":{"type":"string","description":"the artifact it was made from, if any"},
		"params":{"type":"object","description":"how it was made (shown in the gallery)"}`, "attachmentId"),
	"select": object("Put an image of the gallery on the stage.",
		attachment("the image to show"), "attachmentId"),
	"delete": object("Hide an image from the gallery (the artifact stays).",
		attachment("the image to hide"), "attachmentId"),
	"sync": object("Rebuild the gallery from the session's image artifacts.", ``),
	"preview": object("Show (or clear) the live preview of an edit or a generation in progress.", `"stage":{"type":"string","description":"what is happening, for people"},
		"progress":{"type":"number","minimum":0,"maximum":1},
		"artifact":{"type":"string","description":"the preview image's artifact id"},
		"task":{"type":"string"},
		"clear":{"type":"boolean","description":"true: remove the preview"}`),
	"rotate": editSchema("Rotate an image clockwise by some degrees; the result is a new image derived from it.",
		`"degrees":{"type":"number","minimum":-360,"maximum":360,"description":"clockwise; negative turns left; not 0"}`, "degrees"),
	"flip": editSchema("Mirror an image; the result is a new image derived from it.",
		`"axis":{"type":"string","enum":["horizontal","vertical"]}`, "axis"),
	"crop": editSchema("Crop an image to a box, in pixels; the result is a new image derived from it.",
		`"x":{"type":"integer","minimum":0},"y":{"type":"integer","minimum":0},
		"w":{"type":"integer","minimum":1},"h":{"type":"integer","minimum":1}`, "w", "h"),
	"resize": editSchema("Resize an image by a scale, or to a width and/or height (0 keeps the aspect ratio); the result is a new image derived from it.",
		fmt.Sprintf(`"width":{"type":"integer","minimum":0,"maximum":%d},"height":{"type":"integer","minimum":0,"maximum":%d},
		"scale":{"type":"number","exclusiveMinimum":0,"maximum":8}`, maxSide, maxSide)),
	"grayscale": editSchema("Make an image black and white; the result is a new image derived from it.", ``),
	"adjust": editSchema("Change an image's brightness, contrast and saturation, in percent; the result is a new image derived from it.",
		`"brightness":{"type":"number","minimum":-100,"maximum":100},
		"contrast":{"type":"number","minimum":-100,"maximum":100},
		"saturation":{"type":"number","minimum":-100,"maximum":100}`),
	"blur": editSchema("Blur an image (Gaussian); the result is a new image derived from it.",
		`"sigma":{"type":"number","exclusiveMinimum":0,"maximum":50}`, "sigma"),
	"sharpen": editSchema("Sharpen an image; the result is a new image derived from it.",
		`"sigma":{"type":"number","exclusiveMinimum":0,"maximum":10}`, "sigma"),
	"invert": editSchema("Make the negative of an image; the result is a new image derived from it.", ``),
}

func attachment(what string) string {
	return `"attachmentId":{"type":"string","description":"` + what + ` (att_…)"}`
}

// editSchema is the schema of an edit command: its own properties and the image
// it edits (the one on the stage when absent).
func editSchema(description, props string, required ...string) string {
	if props != "" {
		props = "," + props
	}
	return object(description, attachment("the image to edit; absent: the one on the stage")+props, required...)
}

func object(description, props string, required ...string) string {
	req, _ := json.Marshal(required)
	if len(required) == 0 {
		req = []byte("[]")
	}
	desc, _ := json.Marshal(description)
	s := `{"type":"object","description":` + string(desc) + `,"properties":{` + props + `},"required":` + string(req) + `,"additionalProperties":false}`
	if !json.Valid([]byte(s)) {
		panic("canvas: the args schema of a command is not JSON: " + s)
	}
	return s
}
