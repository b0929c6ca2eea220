section .rodata
    cities  dd paris, oslo, cairo, lima
    paris   db "Paris", 0
    oslo    db "Oslo", 0
    cairo   db "Cairo", 0
    lima    db "Lima", 0
    NUM_CITIES equ 4

section .data
    best_temp  dq -1000.0
    best_city  dd 0

section .text
global _start
_start:
    xor esi, esi                    ; i = 0
.loop:
    push dword [cities + esi*4]
    call get_temperature
    movd xmm0, eax                  ; the temperature
    comiss xmm0, dword [best_temp]
    jbe .next                       ; not warmer
    movss dword [best_temp], xmm0
    mov ebx, [cities + esi*4]
    mov [best_city], ebx
.next:
    inc esi
    cmp esi, NUM_CITIES
    jl .loop
    push dword [best_city]
    call announce
    ret
