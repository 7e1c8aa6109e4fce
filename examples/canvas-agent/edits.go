package main

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/disintegration/imaging"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/agentproc/agentkit"
)

// maxSide bounds the width and height an edit may produce.
const maxSide = 4096

// edit is one deterministic image operation. check validates its arguments
// before any artifact is read; apply returns the new image and the params
// recorded for it (with anything resolved against the image, e.g. the
// pixel box of a centre crop), which become the item's lineage.
type edit interface {
	check() error
	apply(src image.Image) (image.Image, map[string]any, error)
}

func invalidArgs(format string, args ...any) error {
	return agentkit.Errorf(agentproc.CodeInvalidArgs, format, args...)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// rotateEdit turns the image clockwise by Degrees. Multiples of 90 are exact;
// other angles enlarge the canvas and leave transparent corners.
type rotateEdit struct {
	Degrees float64 `json:"degrees"`
}

func (e rotateEdit) check() error {
	if !finite(e.Degrees) || e.Degrees < -360 || e.Degrees > 360 {
		return invalidArgs("rotate: degrees must be a number from -360 to 360")
	}
	if e.Degrees == 0 {
		return invalidArgs("rotate: degrees must not be 0")
	}
	return nil
}

func (e rotateEdit) apply(src image.Image) (image.Image, map[string]any, error) {
	p := map[string]any{"op": "rotate", "degrees": e.Degrees}
	switch math.Mod(e.Degrees+720, 360) {
	case 0:
		return imaging.Clone(src), p, nil
	case 90:
		return imaging.Rotate270(src), p, nil // imaging turns counter-clockwise
	case 180:
		return imaging.Rotate180(src), p, nil
	case 270:
		return imaging.Rotate90(src), p, nil
	}
	return imaging.Rotate(src, -e.Degrees, color.Transparent), p, nil
}

// flipEdit mirrors the image along an axis: "horizontal" (left ↔ right) or
// "vertical" (top ↔ bottom).
type flipEdit struct {
	Axis string `json:"axis"`
}

func (e flipEdit) check() error {
	switch e.Axis {
	case "horizontal", "vertical":
		return nil
	}
	return invalidArgs("flip: axis must be \"horizontal\" or \"vertical\", not %q", e.Axis)
}

func (e flipEdit) apply(src image.Image) (image.Image, map[string]any, error) {
	p := map[string]any{"op": "flip", "axis": e.Axis}
	if e.Axis == "vertical" {
		return imaging.FlipV(src), p, nil
	}
	return imaging.FlipH(src), p, nil
}

// cropEdit keeps the box {X, Y, W, H} (pixels of the source). Fraction, set
// only by instructions ("crop it"), keeps a centred box of that fraction of
// each side instead.
type cropEdit struct {
	X        int     `json:"x"`
	Y        int     `json:"y"`
	W        int     `json:"w"`
	H        int     `json:"h"`
	Fraction float64 `json:"-"`
}

func (e cropEdit) check() error {
	if e.Fraction != 0 {
		if e.Fraction <= 0 || e.Fraction >= 1 {
			return invalidArgs("crop: fraction must be between 0 and 1")
		}
		return nil
	}
	if e.X < 0 || e.Y < 0 || e.W <= 0 || e.H <= 0 {
		return invalidArgs("crop: needs x ≥ 0, y ≥ 0, w > 0 and h > 0")
	}
	return nil
}

func (e cropEdit) apply(src image.Image) (image.Image, map[string]any, error) {
	b := src.Bounds()
	if e.Fraction != 0 {
		e.W = max(1, int(math.Round(float64(b.Dx())*e.Fraction)))
		e.H = max(1, int(math.Round(float64(b.Dy())*e.Fraction)))
		e.X, e.Y = (b.Dx()-e.W)/2, (b.Dy()-e.H)/2
	}
	box := image.Rect(e.X, e.Y, e.X+e.W, e.Y+e.H).Add(b.Min).Intersect(b)
	if box.Empty() {
		return nil, nil, invalidArgs("crop: the box %d,%d %d×%d lies outside the %d×%d image", e.X, e.Y, e.W, e.H, b.Dx(), b.Dy())
	}
	p := map[string]any{"op": "crop", "x": box.Min.X - b.Min.X, "y": box.Min.Y - b.Min.Y, "w": box.Dx(), "h": box.Dy()}
	return imaging.Crop(src, box), p, nil
}

// resizeEdit scales the image to Width×Height; a zero side keeps the aspect
// ratio. Scale, when set instead, multiplies both sides.
type resizeEdit struct {
	Width  int     `json:"width"`
	Height int     `json:"height"`
	Scale  float64 `json:"scale,omitempty"`
}

func (e resizeEdit) check() error {
	if e.Scale != 0 {
		if !finite(e.Scale) || e.Scale <= 0 || e.Scale > 8 {
			return invalidArgs("resize: scale must be above 0 and at most 8")
		}
		return nil
	}
	if e.Width < 0 || e.Height < 0 || e.Width > maxSide || e.Height > maxSide || (e.Width == 0 && e.Height == 0) {
		return invalidArgs("resize: needs width and/or height from 1 to %d (0 keeps the aspect ratio)", maxSide)
	}
	return nil
}

func (e resizeEdit) apply(src image.Image) (image.Image, map[string]any, error) {
	b := src.Bounds()
	w, h := e.Width, e.Height
	if e.Scale != 0 {
		w = int(math.Round(float64(b.Dx()) * e.Scale))
		h = int(math.Round(float64(b.Dy()) * e.Scale))
	} else if w == 0 {
		w = int(math.Round(float64(b.Dx()) * float64(h) / float64(b.Dy())))
	} else if h == 0 {
		h = int(math.Round(float64(b.Dy()) * float64(w) / float64(b.Dx())))
	}
	w, h = max(1, w), max(1, h)
	if w > maxSide || h > maxSide {
		return nil, nil, invalidArgs("resize: %d×%d is larger than %d on a side", w, h, maxSide)
	}
	return imaging.Resize(src, w, h, imaging.Lanczos), map[string]any{"op": "resize", "width": w, "height": h}, nil
}

// grayscaleEdit drops the colour.
type grayscaleEdit struct{}

func (grayscaleEdit) check() error { return nil }

func (grayscaleEdit) apply(src image.Image) (image.Image, map[string]any, error) {
	return imaging.Grayscale(src), map[string]any{"op": "grayscale"}, nil
}

// adjustEdit changes brightness, contrast and saturation, each in percent
// from -100 to 100.
type adjustEdit struct {
	Brightness float64 `json:"brightness"`
	Contrast   float64 `json:"contrast"`
	Saturation float64 `json:"saturation,omitempty"`
}

func (e adjustEdit) check() error {
	for name, v := range map[string]float64{"brightness": e.Brightness, "contrast": e.Contrast, "saturation": e.Saturation} {
		if !finite(v) || v < -100 || v > 100 {
			return invalidArgs("adjust: %s must be from -100 to 100", name)
		}
	}
	if e.Brightness == 0 && e.Contrast == 0 && e.Saturation == 0 {
		return invalidArgs("adjust: set brightness, contrast or saturation (percent, -100 to 100)")
	}
	return nil
}

func (e adjustEdit) apply(src image.Image) (image.Image, map[string]any, error) {
	p := map[string]any{"op": "adjust"}
	img := image.Image(src)
	if e.Brightness != 0 {
		img = imaging.AdjustBrightness(img, e.Brightness)
		p["brightness"] = e.Brightness
	}
	if e.Contrast != 0 {
		img = imaging.AdjustContrast(img, e.Contrast)
		p["contrast"] = e.Contrast
	}
	if e.Saturation != 0 {
		img = imaging.AdjustSaturation(img, e.Saturation)
		p["saturation"] = e.Saturation
	}
	return img, p, nil
}

// blurEdit softens with a Gaussian of Sigma pixels (0 < sigma ≤ 50).
type blurEdit struct {
	Sigma float64 `json:"sigma"`
}

func (e blurEdit) check() error {
	if !finite(e.Sigma) || e.Sigma <= 0 || e.Sigma > 50 {
		return invalidArgs("blur: sigma must be above 0 and at most 50")
	}
	return nil
}

func (e blurEdit) apply(src image.Image) (image.Image, map[string]any, error) {
	return imaging.Blur(src, e.Sigma), map[string]any{"op": "blur", "sigma": e.Sigma}, nil
}

// sharpenEdit sharpens with a Gaussian of Sigma pixels (0 < sigma ≤ 10).
type sharpenEdit struct {
	Sigma float64 `json:"sigma"`
}

func (e sharpenEdit) check() error {
	if !finite(e.Sigma) || e.Sigma <= 0 || e.Sigma > 10 {
		return invalidArgs("sharpen: sigma must be above 0 and at most 10")
	}
	return nil
}

func (e sharpenEdit) apply(src image.Image) (image.Image, map[string]any, error) {
	return imaging.Sharpen(src, e.Sigma), map[string]any{"op": "sharpen", "sigma": e.Sigma}, nil
}

// invertEdit makes the negative.
type invertEdit struct{}

func (invertEdit) check() error { return nil }

func (invertEdit) apply(src image.Image) (image.Image, map[string]any, error) {
	return imaging.Invert(src), map[string]any{"op": "invert"}, nil
}

// addsAlpha reports whether an edit may leave transparent pixels (so the
// result cannot be a JPEG).
func addsAlpha(e edit) bool {
	r, ok := e.(rotateEdit)
	return ok && math.Mod(r.Degrees, 90) != 0
}

// instructionHelp lists what instructions understand.
const instructionHelp = "brighter, darker, more/less contrast, more/less saturated, black and white, blur, sharpen, " +
	"invert, rotate [left|right|180|N degrees], flip [vertical], crop, smaller, larger"

var numberRE = regexp.MustCompile(`-?\d+(?:\.\d+)?`)

// parseInstruction maps a plain-language instruction ("make it brighter and
// rotate it left") to edits, in the order the instruction names them. It is
// how image_edit works with any model: the model words the instruction, the
// canvas applies exact operations. An instruction it cannot map gives no edits.
func parseInstruction(instruction string) []edit {
	// Artifact ids are names, not amounts: "blur att_0…01" is no sigma 1.
	text := " " + strings.ToLower(attRE.ReplaceAllString(instruction, " ")) + " "
	words := strings.FieldsFunc(text, func(r rune) bool {
		return !(r >= 'a' && r <= 'z') && !(r >= '0' && r <= '9') && r != '&'
	})
	// at is the position of the first word starting with one of prefixes, or -1.
	at := func(prefixes ...string) int {
		for i, w := range words {
			for _, p := range prefixes {
				if strings.HasPrefix(w, p) {
					return i
				}
			}
		}
		return -1
	}
	has := func(prefixes ...string) bool { return at(prefixes...) >= 0 }
	// number is the first number in the instruction, if any.
	number := func() (float64, bool) {
		m := numberRE.FindString(text)
		if m == "" {
			return 0, false
		}
		v, err := strconv.ParseFloat(m, 64)
		return v, err == nil
	}
	type found struct {
		pos int
		e   edit
	}
	var out []found
	add := func(pos int, e edit) {
		if pos >= 0 && e.check() == nil {
			out = append(out, found{pos, e})
		}
	}
	amount := func(def float64) float64 {
		if n, ok := number(); ok && n > 0 && n <= 100 {
			return n
		}
		return def
	}

	less := has("less", "lower", "reduce", "decrease", "fewer")
	if i := at("bright", "lighter", "lighten"); i >= 0 && !has("less") {
		add(i, adjustEdit{Brightness: amount(20)})
	}
	if i := at("darker", "darken", "dim"); i >= 0 {
		add(i, adjustEdit{Brightness: -amount(20)})
	} else if i := at("bright"); i >= 0 && has("less") {
		add(i, adjustEdit{Brightness: -amount(20)})
	}
	if i := at("contrast"); i >= 0 {
		if less {
			add(i, adjustEdit{Contrast: -25})
		} else {
			add(i, adjustEdit{Contrast: 25})
		}
	}
	if i := at("desaturat", "muted", "washed"); i >= 0 {
		add(i, adjustEdit{Saturation: -40})
	} else if i := at("saturat", "vivid", "vibrant", "colorful", "colourful"); i >= 0 {
		if less {
			add(i, adjustEdit{Saturation: -40})
		} else {
			add(i, adjustEdit{Saturation: 40})
		}
	}
	if i := at("grayscale", "greyscale", "monochrome", "b&w", "gray", "grey"); i >= 0 {
		add(i, grayscaleEdit{})
	} else if strings.Contains(text, "black and white") || strings.Contains(text, "black & white") || strings.Contains(text, "black-and-white") {
		add(at("black"), grayscaleEdit{})
	}
	if i := at("blur", "soften", "soft"); i >= 0 {
		s := 3.0
		if n, ok := number(); ok && n > 0 && n <= 50 {
			s = n
		}
		add(i, blurEdit{Sigma: s})
	}
	if i := at("sharpen", "sharper", "crisp"); i >= 0 {
		add(i, sharpenEdit{Sigma: 1.5})
	}
	if i := at("invert", "negative"); i >= 0 {
		add(i, invertEdit{})
	}
	if i := at("rotat", "turn"); i >= 0 {
		deg := 90.0
		switch {
		case has("left", "counterclockwise", "anticlockwise", "counter"):
			deg = -90
		case strings.Contains(text, "upside down") || has("180"):
			deg = 180
		default:
			if n, ok := number(); ok && n != 0 && n >= -360 && n <= 360 {
				deg = n
			}
		}
		add(i, rotateEdit{Degrees: deg})
	}
	if i := at("flip", "mirror"); i >= 0 {
		axis := "horizontal"
		if has("vertical", "upside") {
			axis = "vertical"
		}
		add(i, flipEdit{Axis: axis})
	}
	if i := at("crop", "trim", "zoom"); i >= 0 {
		add(i, cropEdit{Fraction: 0.8})
	}
	if i := at("smaller", "shrink", "half", "downscale", "downsize"); i >= 0 {
		add(i, resizeEdit{Scale: 0.5})
	} else if i := at("larger", "bigger", "enlarge", "double", "upscale"); i >= 0 {
		add(i, resizeEdit{Scale: 2})
	}
	slices.SortStableFunc(out, func(a, b found) int { return a.pos - b.pos })
	edits := make([]edit, len(out))
	for i, f := range out {
		edits[i] = f.e
	}
	return edits
}

// describe is a short human description of recorded params ("rotate 90°").
func describe(p map[string]any) string {
	switch p["op"] {
	case "rotate":
		return fmt.Sprintf("rotate %v°", p["degrees"])
	case "flip":
		return fmt.Sprintf("flip %v", p["axis"])
	case "crop":
		return fmt.Sprintf("crop %v×%v at %v,%v", p["w"], p["h"], p["x"], p["y"])
	case "resize":
		return fmt.Sprintf("resize to %v×%v", p["width"], p["height"])
	case "adjust":
		var parts []string
		for _, k := range []string{"brightness", "contrast", "saturation"} {
			if v, ok := p[k]; ok {
				parts = append(parts, fmt.Sprintf("%s %+v", k, v))
			}
		}
		return strings.Join(parts, ", ")
	case "blur", "sharpen":
		return fmt.Sprintf("%v σ%v", p["op"], p["sigma"])
	}
	return fmt.Sprint(p["op"])
}
