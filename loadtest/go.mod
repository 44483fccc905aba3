module switchyard.dev/loadtest

go 1.26.8

require (
	gonum.org/v1/plot v0.15.2
	switchyard.dev/libs/mooncake v0.0.0
)

require (
	codeberg.org/go-fonts/liberation v0.4.1 // indirect
	codeberg.org/go-latex/latex v0.0.1 // indirect
	codeberg.org/go-pdf/fpdf v0.10.0 // indirect
	git.sr.ht/~sbinet/gg v0.6.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/campoy/embedmd v1.0.0 // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	golang.org/x/image v0.24.0 // indirect
	golang.org/x/text v0.22.0 // indirect
	switchyard.dev/libs/sharedtest v0.0.0
)

replace switchyard.dev/libs/mooncake => ../libs/mooncake

replace switchyard.dev/libs/sharedtest => ../libs/sharedtest
