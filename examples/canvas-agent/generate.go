package main

import (
	"hash/fnv"
	"image"
	"image/color"
	"math"
	"math/rand/v2"
	"strings"
)

// Generation bounds.
const (
	minGenSide     = 64
	maxGenSide     = 1536
	defaultGenW    = 768
	defaultGenH    = 512
	maxPromptBytes = 300
)

// palette is a scene's colours: sky top and bottom, the light (sun or moon),
// and the ridges from far to near.
type palette struct {
	skyTop, skyBottom, light color.NRGBA
	ridges                   [3]color.NRGBA
}

func rgb(hex uint32) color.NRGBA {
	return color.NRGBA{R: uint8(hex >> 16), G: uint8(hex >> 8), B: uint8(hex), A: 255}
}

// palettes by the words of a prompt that pick them.
var palettes = []struct {
	words []string
	p     palette
}{
	{[]string{"sunset", "dusk", "evening", "sunrise", "dawn"}, palette{rgb(0x2b1d52), rgb(0xf7945c), rgb(0xffd38a), [3]color.NRGBA{rgb(0x8a4f7d), rgb(0x5b3564), rgb(0x2e1b3d)}}},
	{[]string{"night", "space", "star", "moon", "galaxy", "dark"}, palette{rgb(0x05081c), rgb(0x1c2a5a), rgb(0xf2f0d8), [3]color.NRGBA{rgb(0x27335e), rgb(0x18203f), rgb(0x0b1024)}}},
	{[]string{"ocean", "sea", "beach", "water", "lake", "wave", "blue"}, palette{rgb(0x5fb3e8), rgb(0xd6efff), rgb(0xfffbe6), [3]color.NRGBA{rgb(0x6c9bb8), rgb(0x2f6f9a), rgb(0x14476b)}}},
	{[]string{"forest", "tree", "green", "jungle", "meadow", "spring"}, palette{rgb(0x8fd3ff), rgb(0xe9f8e4), rgb(0xfff6c8), [3]color.NRGBA{rgb(0x7fae7a), rgb(0x3f7d48), rgb(0x1d4a2a)}}},
	{[]string{"desert", "sand", "dune", "canyon", "gold", "yellow"}, palette{rgb(0xf3c98b), rgb(0xfbe9c8), rgb(0xfff3d1), [3]color.NRGBA{rgb(0xd9a066), rgb(0xb8733e), rgb(0x7a4423)}}},
	{[]string{"snow", "winter", "ice", "frozen", "arctic", "white"}, palette{rgb(0xaac8e6), rgb(0xf4f8fc), rgb(0xffffff), [3]color.NRGBA{rgb(0xc9d9e8), rgb(0x93afc8), rgb(0x5d7d99)}}},
	{[]string{"fire", "lava", "volcano", "red", "hell"}, palette{rgb(0x3a0a0a), rgb(0xe0482b), rgb(0xffd166), [3]color.NRGBA{rgb(0x8c2318), rgb(0x561310), rgb(0x240707)}}},
	{[]string{"purple", "violet", "dream", "fantasy", "pink", "candy"}, palette{rgb(0x6a4bc4), rgb(0xf7b6d9), rgb(0xfff0fa), [3]color.NRGBA{rgb(0xb07cc6), rgb(0x7a4fa3), rgb(0x41286b)}}},
}

// sceneWords are prompt words that add elements to the scene.
type scene struct {
	stars, water, night bool
}

// generateImage paints a deterministic landscape for prompt: the same prompt
// and size always give the same pixels. The prompt picks the palette
// (sunset, night, ocean, forest, desert, snow, fire, purple, … or one chosen
// by the prompt's hash) and elements (stars at night, water for the sea);
// its hash places the light and shapes the ridges.
func generateImage(prompt string, w, h int) *image.NRGBA {
	hash := fnv.New64a()
	_, _ = hash.Write([]byte(strings.ToLower(strings.TrimSpace(prompt))))
	seed := hash.Sum64()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	lower := strings.ToLower(prompt)
	pal := palettes[seed%uint64(len(palettes))].p
	best := -1
	for _, cand := range palettes {
		for _, word := range cand.words {
			if i := strings.Index(lower, word); i >= 0 && (best < 0 || i < best) {
				best, pal = i, cand.p
			}
		}
	}
	sc := scene{}
	for _, word := range []string{"night", "space", "star", "moon", "galaxy"} {
		if strings.Contains(lower, word) {
			sc.stars, sc.night = true, true
		}
	}
	for _, word := range []string{"ocean", "sea", "beach", "water", "lake", "wave", "river", "reflection"} {
		if strings.Contains(lower, word) {
			sc.water = true
		}
	}

	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	fw, fh := float64(w), float64(h)
	// The light: a disc with a glow, somewhere in the upper sky.
	lx, ly := fw*(0.2+0.6*rng.Float64()), fh*(0.15+0.25*rng.Float64())
	lr := math.Min(fw, fh) * (0.06 + 0.05*rng.Float64())
	// The ridges: sums of sines with random phases, far ones higher and smoother.
	type ridge struct {
		base, amp float64
		freq      [3]float64
		phase     [3]float64
	}
	var ridges [3]ridge
	for i := range ridges {
		ridges[i].base = fh * (0.48 + 0.13*float64(i))
		ridges[i].amp = fh * (0.10 - 0.02*float64(i))
		for k := range 3 {
			ridges[i].freq[k] = (1.5 + 2.5*rng.Float64()) * float64(k+1) * math.Pi / fw
			ridges[i].phase[k] = rng.Float64() * 2 * math.Pi
		}
	}
	ridgeAt := func(i int, x float64) float64 {
		r := ridges[i]
		y := r.base
		for k := range 3 {
			y -= r.amp / float64(k+1) * math.Sin(x*r.freq[k]+r.phase[k])
		}
		return y
	}
	waterLine := fh * 0.72
	starSeed := seed

	for y := range h {
		fy := float64(y)
		for x := range w {
			fx := float64(x)
			// Sky.
			c := mix(pal.skyTop, pal.skyBottom, fy/fh)
			if sc.stars && fy < fh*0.6 {
				n := hash2(uint64(x), uint64(y), starSeed)
				if n%997 == 0 {
					c = mix(c, rgb(0xffffff), 0.5+float64(n%50)/100)
				}
			}
			// Light and glow.
			d := math.Hypot(fx-lx, fy-ly)
			if d < lr {
				c = mix(c, pal.light, 0.95)
			} else {
				glow := math.Exp(-(d - lr) / (lr * 2.2))
				c = mix(c, pal.light, 0.55*glow)
			}
			// Ridges, far to near.
			for i := range ridges {
				if top := ridgeAt(i, fx); fy >= top {
					shade := 1 - 0.25*math.Min(1, (fy-top)/(fh*0.4))
					rc := pal.ridges[i]
					c = mix(c, color.NRGBA{R: uint8(float64(rc.R) * shade), G: uint8(float64(rc.G) * shade), B: uint8(float64(rc.B) * shade), A: 255}, 1)
				}
			}
			// Water reflects the sky, rippled.
			if sc.water && fy >= waterLine {
				depth := (fy - waterLine) / (fh - waterLine)
				ry := waterLine - (fy-waterLine)*0.8
				sky := mix(pal.skyTop, pal.skyBottom, ry/fh)
				ripple := 0.5 + 0.5*math.Sin(fy*0.9+math.Sin(fx*0.05)*2)
				water := mix(sky, pal.ridges[2], 0.35+0.4*depth)
				if math.Abs(fx-lx) < lr*(1.2+depth*2) && ripple > 0.6 {
					water = mix(water, pal.light, 0.6*(1-depth))
				}
				c = mix(water, rgb(0xffffff), 0.06*ripple)
			}
			if sc.night {
				c = mix(c, rgb(0x000010), 0.1)
			}
			img.SetNRGBA(x, y, c)
		}
	}
	return img
}

// mix blends a toward b by t (0…1).
func mix(a, b color.NRGBA, t float64) color.NRGBA {
	t = math.Max(0, math.Min(1, t))
	l := func(x, y uint8) uint8 { return uint8(math.Round(float64(x) + (float64(y)-float64(x))*t)) }
	return color.NRGBA{R: l(a.R, b.R), G: l(a.G, b.G), B: l(a.B, b.B), A: 255}
}

// hash2 is a cheap deterministic hash of a pixel position.
func hash2(x, y, seed uint64) uint64 {
	h := x*0x9e3779b97f4a7c15 ^ y*0xc2b2ae3d27d4eb4f ^ seed
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 29
	return h
}
