; heater level = whole degrees below the target, between 0 and 5
section .data
    target    dq 21.0
    max_level dd 5
section .rodata
    home db "Home", 0
section .text
_start:
    push home
    call get_temperature
    movq xmm1, rax                ; current temperature
    movsd xmm0, qword [target]
    subsd xmm0, xmm1              ; degrees missing
    cvttsd2si eax, xmm0
    test eax, eax
    jns .positive
    xor eax, eax                  ; warm enough: off
.positive:
    cmp eax, dword [max_level]
    jle .set
    mov eax, dword [max_level]
.set:
    push eax
    call set_heater
    hlt
